package redact

import (
	"strings"
	"unicode"
)

// secretWords are the words of a flag, variable, query parameter, JSON key
// or header name that say its value is a secret. A name is split into
// words at '-', '_', '.', other punctuation and camelCase (AWSAccessKeyId:
// aws access key id), so that "tokens" (--max-num-batched-tokens, a count)
// and "tokenizer" (a path) are not secrets while hf_token is. The list:
//   - key, apikey, token, secret, password (and passwd, pass, pwd, pw,
//     passphrase), credential(s), auth, authorization, bearer, cookie,
//     session, jwt, otp, hmac, private: what servers and SDKs name their
//     keys (--api-key, HF_TOKEN, OPENAI_API_KEY, --ssl-keyfile-password,
//     --private-key).
//   - signature, sig: signed URLs (S3 X-Amz-Signature, GCS X-Goog-Signature,
//     Azure SAS sig, CloudFront Signature), whose signature is a bearer
//     credential until it expires.
//
// X-Amz-Credential, X-Goog-Credential and AWSAccessKeyId name an access key
// id, which alone grants nothing but pairs with a leaked secret: redacted
// too (credential, key).
var secretWords = map[string]bool{
	"key": true, "apikey": true, "token": true, "secret": true, "secrets": true,
	"password": true, "passwd": true, "pass": true, "pwd": true, "pw": true, "passphrase": true,
	"credential": true, "credentials": true, "cred": true, "creds": true,
	"auth": true, "authorization": true, "bearer": true, "cookie": true, "cookies": true,
	"session": true, "sessionid": true, "jwt": true, "otp": true, "hmac": true, "private": true,
	"signature": true, "sig": true,
}

// secretParts are found inside a word too: names run together
// (authtoken, xapikey, clientsecret, dbpassword).
var secretParts = []string{"passw", "secret", "credential", "apikey", "accesskey", "privatekey", "signature", "cookie", "bearer", "authtoken", "accesstoken"}

// SecretName says whether a flag, variable, parameter, key or header name
// names a secret.
func SecretName(name string) bool {
	for _, w := range words(name) {
		if secretWords[w] {
			return true
		}
		for _, p := range secretParts {
			if strings.Contains(w, p) {
				return true
			}
		}
		// token inside a word (hftoken, idtoken), but not tokens or tokenizer.
		if i := strings.Index(w, "token"); i >= 0 && !strings.HasPrefix(w[i:], "tokens") && !strings.HasPrefix(w[i:], "tokeniz") {
			return true
		}
	}
	return false
}

// secretParam says whether a URL query or fragment parameter names a
// secret: a secret name, or code (an OAuth authorization code in a
// redirect URL; as a flag word it is --trust-remote-code, no secret).
func secretParam(name string) bool {
	return SecretName(name) || strings.EqualFold(name, "code")
}

// words splits a name into lower-case words at punctuation and camelCase.
func words(name string) []string {
	var out []string
	var cur []rune
	rs := []rune(name)
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prevLower := unicode.IsLower(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				flush() // accessKey | AWSAccess
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}
