package redact

import (
	"slices"
	"strings"
	"testing"
)

// TestArgs: secrets in the forms servers and tools take them, each row an
// argv and what is exported of it.
func TestArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		// Flags named like secrets, with the value attached or next.
		{[]string{"python3", "-m", "sglang.launch_server", "--api-key=sk-SECRET-123", "--port", "30000"},
			[]string{"python3", "-m", "sglang.launch_server", "--api-key=REDACTED", "--port", "30000"}},
		{[]string{"vllm", "serve", "--api-key", "sk-SECRET-123", "--hf-token", "hf_abc", "--model", "m"},
			[]string{"vllm", "serve", "--api-key", "REDACTED", "--hf-token", "REDACTED", "--model", "m"}},
		{[]string{"srv", "--signature", "abc", "--bearer=xyz", "--credentials", "c", "--private-key", "pk", "--passwd", "pw", "--pwd=p", "--client-secret"},
			[]string{"srv", "--signature", "REDACTED", "--bearer=REDACTED", "--credentials", "REDACTED", "--private-key", "REDACTED", "--passwd", "REDACTED", "--pwd=REDACTED", "--client-secret"}},
		{[]string{"srv", "--Password:", "x", "-token", "t", "--ssl-keyfile-password", "kp"},
			[]string{"srv", "--Password:", "REDACTED", "-token", "REDACTED", "--ssl-keyfile-password", "REDACTED"}},
		// A secret flag followed by another flag keeps that flag.
		{[]string{"srv", "--token", "--port", "1"}, []string{"srv", "--token", "--port", "1"}},
		// Counts and paths named with "tokens" or "tokenizer" are not secrets.
		{[]string{"srv", "--max-num-batched-tokens", "8192", "--tokenizer", "/m/tok", "--skip-tokenizer-init", "--trust-remote-code", "x"},
			[]string{"srv", "--max-num-batched-tokens", "8192", "--tokenizer", "/m/tok", "--skip-tokenizer-init", "--trust-remote-code", "x"}},
		// Environment-style arguments.
		{[]string{"env", "HF_TOKEN=hf_abc", "OPENAI_API_KEY=sk-x", "PATH=/bin", "AWS_SECRET_ACCESS_KEY=wJal", "model.hf_token=t", "srv"},
			[]string{"env", "HF_TOKEN=REDACTED", "OPENAI_API_KEY=REDACTED", "PATH=/bin", "AWS_SECRET_ACCESS_KEY=REDACTED", "model.hf_token=REDACTED", "srv"}},
		// URLs: credentials, secret query parameters, as a value of --flag=URL too.
		{[]string{"srv", "--model-url=https://bob:hunter2@models.example/x", "s3://AKIA:secret@bucket/k"},
			[]string{"srv", "--model-url=https://REDACTED@models.example/x", "s3://REDACTED@bucket/k"}},
		{[]string{"srv", "--db", "postgres://u:p@db:5432/x?sslmode=disable&password=p2"},
			[]string{"srv", "--db", "postgres://REDACTED@db:5432/x?sslmode=disable&password=REDACTED"}},
		{[]string{"srv", "--model-url=https://h/m?token=tok123&rev=main", "https://h/m?token=tok456"},
			[]string{"srv", "--model-url=https://h/m?token=REDACTED&rev=main", "https://h/m?token=REDACTED"}},
		// Signed URLs: S3, GCS, Azure SAS, CloudFront.
		{[]string{"--weights=https://b.s3.amazonaws.com/w?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAX%2F20240101%2Fus-east-1&X-Amz-Security-Token=FwoG&X-Amz-Signature=9f86d0&X-Amz-Expires=3600"},
			[]string{"--weights=https://b.s3.amazonaws.com/w?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Expires=3600"}},
		{[]string{"https://storage.googleapis.com/b/o?X-Goog-Credential=sa%40p.iam&X-Goog-Signature=abcd&X-Goog-Date=20240101"},
			[]string{"https://storage.googleapis.com/b/o?X-Goog-Credential=REDACTED&X-Goog-Signature=REDACTED&X-Goog-Date=20240101"}},
		{[]string{"https://a.blob.core.windows.net/c/m?sv=2022-11-02&se=2030&sp=r&sig=AbC%2Bd%3D"},
			[]string{"https://a.blob.core.windows.net/c/m?sv=2022-11-02&se=2030&sp=r&sig=REDACTED"}},
		{[]string{"https://d.cloudfront.net/m?Expires=1&Signature=xyz~&Key-Pair-Id=K2", "https://s3.amazonaws.com/b/k?AWSAccessKeyId=AKIA&Signature=s"},
			[]string{"https://d.cloudfront.net/m?Expires=1&Signature=REDACTED&Key-Pair-Id=REDACTED", "https://s3.amazonaws.com/b/k?AWSAccessKeyId=REDACTED&Signature=REDACTED"}},
		// Fragments and OAuth redirects.
		{[]string{"--callback=https://app/cb#access_token=at1&token_type=bearer", "https://app/cb?code=oc1&state=s"},
			[]string{"--callback=https://app/cb#access_token=REDACTED&token_type=REDACTED", "https://app/cb?code=REDACTED&state=s"}},
		// A query string on its own, a proxy without a scheme.
		{[]string{"--query", "?api_key=k1&x=1", "--proxy", "user:pw@proxy:3128"},
			[]string{"--query", "?api_key=REDACTED&x=1", "--proxy", "REDACTED@proxy:3128"}},
		// A URL that does not parse is dropped.
		{[]string{"srv", "--url=http://h:port/x?token=t1"}, []string{"srv", "--url=REDACTED"}},
		// JSON in flags: secret keys at any depth; JSON that does not parse is dropped.
		{[]string{"vllm", "--hf-overrides", `{"hf_token": "hf_x1", "rope_scaling": {"type": "yarn"}}`},
			[]string{"vllm", "--hf-overrides", `{"hf_token":"REDACTED","rope_scaling":{"type":"yarn"}}`}},
		{[]string{`--model-loader-extra-config={"s3": {"aws_secret_access_key": "wJ", "region": "x"}, "urls": ["https://u:p@h/"]}`},
			[]string{`--model-loader-extra-config={"s3":{"aws_secret_access_key":"REDACTED","region":"x"},"urls":["https://REDACTED@h/"]}`}},
		{[]string{"--hf-overrides", `{'hf_token': 'hf_x1'}`, "--x", `{"a": 1`},
			[]string{"--hf-overrides", "REDACTED", "--x", "REDACTED"}},
		{[]string{"--host", "[::1]", "--ids", "[1, 2]"}, []string{"--host", "[::1]", "--ids", "[1,2]"}},
		// Headers: curl -H, --header=, header lists; unparsable header values dropped.
		{[]string{"curl", "-H", "Authorization: Bearer eyJabc", "-H", "Accept: text/plain", "--header=X-Api-Key: k9", "-HCookie: s=1"},
			[]string{"curl", "-H", "Authorization: REDACTED", "-H", "Accept: text/plain", "--header=X-Api-Key: REDACTED", "-HCookie: REDACTED"}},
		{[]string{"--header", "Proxy-Authorization: Basic dXNlcjpwYXNz", "--extra-headers", "garbage"},
			[]string{"--header", "Proxy-Authorization: REDACTED", "--extra-headers", "REDACTED"}},
		{[]string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer t1,x-tenant=a", "--headers", `{"Authorization": "Bearer t2"}`},
			[]string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=REDACTED,x-tenant=a", "--headers", `{"Authorization":"REDACTED"}`}},
		{[]string{"--note", "sent with Bearer abc.def"}, []string{"--note", "sent with Bearer REDACTED"}},
		// Short flags meaning a secret in common tools; -u USER:PASSWORD.
		{[]string{"mysql", "-pS3cret", "-u", "root", "-h", "db"}, []string{"mysql", "-pREDACTED", "-u", "root", "-h", "db"}},
		{[]string{"openssl", "enc", "-k", "pass1", "-in", "f"}, []string{"openssl", "enc", "-k", "REDACTED", "-in", "f"}},
		{[]string{"redis-cli", "-a", "pw1", "curl", "-u", "alice:pw2", "-ubob:pw3"},
			[]string{"redis-cli", "-a", "REDACTED", "curl", "-u", "alice:REDACTED", "-ubob:REDACTED"}},
		{[]string{"tool", "-api-key", "k1"}, []string{"tool", "-aREDACTED", "REDACTED"}},
		// Tokens of a known shape, wherever they are.
		{[]string{"srv", "--model", "m", "hf_abcdefghijklmnopqrstu", "--note=ghp_abcdefghijklmnopqrstuvwx"},
			[]string{"srv", "--model", "m", "REDACTED", "--note=REDACTED"}},
		// What is not secret stays.
		{[]string{"llama-server", "-m", "/models/a.gguf", "-c", "4096", "--host", "0.0.0.0:8080", "-ngl", "99"},
			[]string{"llama-server", "-m", "/models/a.gguf", "-c", "4096", "--host", "0.0.0.0:8080", "-ngl", "99"}},
		{[]string{"python3", "-u", "-m", "sglang.launch_server", "--model-path", "https://h/m?rev=main#readme"},
			[]string{"python3", "-u", "-m", "sglang.launch_server", "--model-path", "https://h/m?rev=main#readme"}},
	} {
		if got := Args(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Args(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"api-key": true, "hf_token": true, "HF_TOKEN": true, "X-Amz-Signature": true, "AWSAccessKeyId": true,
		"X-Goog-Credential": true, "sig": true, "authToken": true, "clientSecret": true, "dbpassword": true,
		"Authorization": true, "Proxy-Authorization": true, "X-Api-Key": true, "Cookie": true, "idtoken": true,
		"max-tokens": false, "tokenizer": false, "tokenizer-mode": false, "model": false, "port": false,
		"trust-remote-code": false, "signal": false, "design": false, "kv-cache-dtype": false,
	} {
		if got := SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	args := []string{"srv", "--api-key=sk-SECRET-123"}
	if _, ok := CommandLine(args, Off); ok {
		t.Error("Off exports a command line")
	}
	if got, _ := CommandLine(args, Redacted); strings.Contains(got, "SECRET") || got != "srv --api-key=REDACTED" {
		t.Errorf("Redacted: %q", got)
	}
	if got, _ := CommandLine(args, Full); got != "srv --api-key=sk-SECRET-123" {
		t.Errorf("Full: %q", got)
	}
	for in, want := range map[string]Mode{"": Off, "off": Off, "redacted": Redacted, "full": Full} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, m, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes): no error")
	}
}
