package redact

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// secretForms put a secret into an argv the way real command lines carry
// one; each form escapes it as its syntax requires (a URL query-escapes
// it, JSON quotes it).
var secretForms = []func(s string) []string{
	func(s string) []string { return []string{"srv", "--api-key", s, "--port", "1"} },
	func(s string) []string { return []string{"srv", "--api-key=" + s} },
	func(s string) []string { return []string{"srv", "--hf-token", s} },
	func(s string) []string { return []string{"env", "HF_TOKEN=" + s, "srv"} },
	func(s string) []string { return []string{"srv", "--signature", s} },
	func(s string) []string { return []string{"srv", "--bearer=" + s} },
	func(s string) []string { return []string{"srv", "--private-key", s} },
	func(s string) []string { return []string{"openssl", "-k", s} },
	func(s string) []string { return []string{"mysql", "-p" + s} },
	func(s string) []string { return []string{"redis-cli", "-a", s} },
	func(s string) []string { return []string{"curl", "-u", "alice:" + s} },
	func(s string) []string { return []string{"curl", "-H", "Authorization: Bearer " + s} },
	func(s string) []string { return []string{"curl", "--header=Proxy-Authorization: Basic " + s} },
	func(s string) []string { return []string{"curl", "-HX-Api-Key: " + s} },
	func(s string) []string { return []string{"srv", "--model-url=https://h/m?token=" + url.QueryEscape(s)} },
	func(s string) []string {
		return []string{"srv", "https://h/m?rev=1&X-Amz-Signature=" + url.QueryEscape(s)}
	},
	func(s string) []string { return []string{"srv", "--w=https://h/m?sig=" + url.QueryEscape(s) + "&sv=1"} },
	func(s string) []string {
		return []string{"srv", "--cb=https://h/cb#access_token=" + url.QueryEscape(s)}
	},
	func(s string) []string { return []string{"srv", "--db", "postgres://u:" + url.PathEscape(s) + "@db/x"} },
	func(s string) []string { return []string{"srv", "--hf-overrides", `{"hf_token": ` + quote(s) + `}`} },
	func(s string) []string { return []string{"srv", `--cfg={"a": [{"api_key": ` + quote(s) + `}]}`} },
	func(s string) []string {
		return []string{"srv", "--cfg", `{"url": "https://h/?token=` + url.QueryEscape(s) + `"}`}
	},
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzRedact: whatever the secret, in whatever form of secretForms, it is
// not in what Args returns, escaped or not; nor does Args panic on any
// argv.
func FuzzRedact(f *testing.F) {
	for i, s := range []string{"sk-SECRET-123", "hunter2hunter2", "a b&c=d#e", `q"u'o{t}e`, "ünïcödé密码", "REDACTEDx", "50%off/+"} {
		f.Add(uint8(i), s, "--x=y")
	}
	f.Fuzz(func(t *testing.T, form uint8, secret, extra string) {
		_ = Args([]string{extra, secret, "--token", extra}) // must not panic
		if len(secret) < 8 || strings.HasPrefix(secret, "-") || strings.TrimSpace(secret) != secret || strings.ContainsAny(secret, "\x00\n\r\t") {
			return // a flag-like, short or blank secret cannot be told from the argv around it
		}
		mk := secretForms[int(form)%len(secretForms)]
		const placeholder = "PLACEHOLDER"
		skeleton := strings.Join(Args(mk(placeholder)), " ")
		out := strings.Join(Args(mk(secret)), " ")
		for _, enc := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), strings.Trim(quote(secret), `"`)} {
			if len(enc) >= 8 && strings.Contains(out, enc) && !strings.Contains(skeleton, enc) {
				t.Fatalf("form %d: secret %q survives in %q", int(form)%len(secretForms), enc, out)
			}
		}
	})
}
