// Package redact keeps secrets on a command line out of what specprobe
// exports and logs. Inference servers take API keys and tokens as flags
// (--api-key sk-..., HF_TOKEN=... through env), JSON options carry tokens
// (--hf-overrides '{"hf_token": ...}'), and model URLs credentials and
// signatures (https://user:pass@host/..., ?X-Amz-Signature=...).
package redact

import (
	"fmt"
	"regexp"
	"strings"
)

// Mode says what of a command line is exported.
type Mode string

const (
	Off      Mode = "off"      // nothing: process.command_line is not set (default)
	Redacted Mode = "redacted" // with secret values replaced
	Full     Mode = "full"     // as the process has it
)

// ParseMode reads a mode; "" is Off.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Off, nil
	case Off, Redacted, Full:
		return m, nil
	}
	return "", fmt.Errorf("command line mode %q: want off, redacted or full", s)
}

// Mask replaces each secret.
const Mask = "REDACTED"

// Args returns args with every secret replaced by Mask. It parses what it
// redacts, and drops what it cannot parse where a secret may be:
//   - the value of a flag or KEY=VALUE variable named like a secret
//     (SecretName: --api-key X, --hf-token=X, --signature X, --bearer X,
//     --credentials X, --private-key X, --passwd X, HF_TOKEN=X), whatever
//     it is;
//   - the value of a header flag (-H, --header, --headers, ...) with a
//     secret header name (Authorization, Proxy-Authorization, X-Api-Key,
//     Cookie, ...); a header value that does not parse as one is dropped;
//   - the value of a short flag that means a secret in common tools (see
//     secretShort), and the password of -u USER:PASSWORD;
//   - in any other value: secret keys of a JSON document at any depth (JSON
//     that does not parse is dropped whole), credentials and secret query
//     and fragment parameters of URLs anywhere in it (a URL that does not
//     parse is dropped), user:password@, Bearer/Basic credentials and
//     tokens of a known shape.
//
// A secret flag's value is the next argument unless it begins with "--"
// (another flag: --token --port 1 keeps --port); a secret that begins
// with "--" cannot be told from a flag.
func Args(args []string) []string {
	out := make([]string, len(args))
	var pending func(string) string // the previous argument was a flag that takes this one
	for i, a := range args {
		if pending != nil && !strings.HasPrefix(a, "--") {
			out[i], pending = pending(a), nil
			continue
		}
		out[i], pending = arg(a)
	}
	return out
}

// secretShort are short flags whose value is a secret in tools a target
// may be started with: -p (mysql, sshpass, openssl -passin's short
// siblings; llama.cpp's prompt, the user's text), -k (openssl enc, API
// CLIs' key), -a (redis-cli's password). Where the same letter means a
// port or a count the value is dropped too: losing it costs less than a
// password.
var secretShort = map[string]bool{"p": true, "k": true, "a": true}

// headerFlags take an HTTP header (curl -H, --header).
var headerFlags = map[string]bool{"H": true, "header": true, "headers": true, "http-header": true, "extra-header": true, "extra-headers": true}

// headerFlag: -H, --header and names ending in header(s)
// (--extra-headers, OTEL_EXPORTER_OTLP_HEADERS).
func headerFlag(name string) bool {
	lower := strings.ToLower(name)
	return headerFlags[name] || strings.HasSuffix(lower, "header") || strings.HasSuffix(lower, "headers")
}

func mask(string) string { return Mask }

// arg redacts one argument; when it is a flag whose value is the next
// argument, next redacts that one.
func arg(a string) (out string, next func(string) string) {
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		if name, v, ok := strings.Cut(a, "="); ok && envName.MatchString(name) {
			return name + "=" + namedValue(name, v), nil
		}
		return value(a), nil
	}
	if !strings.HasPrefix(a, "--") && len(a) >= 2 {
		if out, next, ok := short(a); ok {
			return out, next
		}
	}
	dashes := "-"
	if strings.HasPrefix(a, "--") {
		dashes = "--"
	}
	name, v, hasValue := strings.Cut(a[len(dashes):], "=")
	if hasValue {
		return dashes + name + "=" + namedValue(name, v), nil
	}
	switch {
	case headerFlag(name):
		return a, header
	case SecretName(name):
		return a, mask
	}
	return a, nil
}

// short handles -X, -XVALUE: a secret short flag, -u USER:PASSWORD, -H.
func short(a string) (out string, next func(string) string, ok bool) {
	letter, attached := a[1:2], a[2:]
	switch {
	case secretShort[letter] && attached == "":
		return a, mask, true
	case secretShort[letter] && SecretName(a[1:]):
		// -pSECRET, or a one-dash long flag (-api-key KEY): both masked.
		return "-" + letter + Mask, mask, true
	case secretShort[letter]:
		return "-" + letter + Mask, nil, true
	case letter == "H" && attached == "":
		return a, header, true
	case letter == "H":
		return "-H" + header(attached), nil, true
	case letter == "u" && attached == "":
		return a, userPassword, true
	case letter == "u":
		return "-u" + userPassword(attached), nil, true
	}
	return "", nil, false
}

// userPassword masks the password of USER:PASSWORD (curl -u); a value
// without ':' is a user name or, for python -u, the script.
func userPassword(v string) string {
	if user, _, ok := strings.Cut(v, ":"); ok {
		return user + ":" + Mask
	}
	return value(v)
}

// envName is a variable's name in NAME=VALUE (env(1), make, Hydra-style
// overrides: model.hf_token=...).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// namedValue redacts the value of a flag or variable called name.
func namedValue(name, v string) string {
	switch {
	case headerFlag(name):
		return header(v)
	case SecretName(name):
		return Mask
	}
	return value(v)
}

// CommandLine is args as the mode exports them, joined by spaces; ok is
// false for Off.
func CommandLine(args []string, m Mode) (line string, ok bool) {
	switch m {
	case Full:
		return strings.Join(args, " "), true
	case Redacted:
		return strings.Join(Args(args), " "), true
	}
	return "", false
}
