package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
)

// value redacts the secrets inside a value that is not itself secret by
// its name: a JSON document (parsed: secret keys at any depth), URLs
// anywhere in it (credentials, secret parameters of the query and the
// fragment), Authorization-style schemes (Bearer x) and tokens whose shape
// gives them away (hf_..., sk-..., AKIA..., JWTs).
func value(v string) string {
	if t := strings.TrimSpace(v); jsonLike.MatchString(t) {
		return jsonValue(t)
	}
	v = urlPattern.ReplaceAllStringFunc(v, redactURL)
	// What a URL pattern may not have taken whole: credentials before an
	// '@' (a scheme-less proxy user:pass@host), secret parameters.
	v = bareUserinfo.ReplaceAllString(v, "${1}"+Mask+"@")
	v = params(v)
	v = authScheme.ReplaceAllString(v, "${1} "+Mask)
	return tokenShape.ReplaceAllString(v, Mask)
}

// jsonLike is how a JSON object or array begins (not "[::1]:80").
var jsonLike = regexp.MustCompile(`^(\{|\[\s*[\[{"0-9tfn\]-])`)

// urlPattern finds a URL: a scheme, "://", and what follows up to a space
// or a quote.
var urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]*`)

// bareUserinfo is user:password@ without a scheme; a URL's was replaced
// already (REDACTED@ has no ':').
var bareUserinfo = regexp.MustCompile(`(^|[\s,;=(/])[^\s/@:=,;(]+:[^\s/@]*@`)

// param is a name=value pair after '?', '&', ';' or '#': a query or
// fragment, within a URL or not (a relative URL, a pre-signed query
// string passed on its own).
var param = regexp.MustCompile(`([?&;#])([^=&;#?\s]+)=([^&;#\s]*)`)

// authScheme is an HTTP authorization scheme followed by its credentials.
var authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|digest|negotiate)\s+[^\s,;'"]+`)

// tokenShape matches secrets that say what they are whatever carries them:
// Hugging Face, OpenAI/Anthropic-style, GitHub, GitLab, Slack and AWS keys
// and JSON web tokens.
var tokenShape = regexp.MustCompile(`\b(hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|(AKIA|ASIA)[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`)

// params masks the values of secret-named parameters in v.
func params(v string) string {
	return param.ReplaceAllStringFunc(v, func(m string) string {
		sub := param.FindStringSubmatch(m)
		name, err := url.QueryUnescape(sub[2])
		if err != nil || secretParam(name) {
			return sub[1] + sub[2] + "=" + Mask
		}
		return m
	})
}

// redactURL masks a URL's credentials (user and password: the user may be
// an access key id) and its secret parameters; a URL that does not parse
// is dropped whole.
func redactURL(raw string) string {
	if _, err := url.Parse(raw); err != nil {
		return Mask
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		rest = Mask + rest[at:]
	}
	return params(scheme + "://" + rest)
}

// jsonValue masks secret-named keys at any depth of a JSON document and
// the secrets in its strings; JSON that does not parse is dropped whole.
func jsonValue(v string) string {
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil || dec.More() {
		return Mask
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsonRedact(doc)); err != nil {
		return Mask
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func jsonRedact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if SecretName(k) {
				v[k] = Mask
			} else {
				v[k] = jsonRedact(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = jsonRedact(x)
		}
	case string:
		return value(v)
	}
	return v
}

// header masks a header flag's value: "Name: value" with a secret name
// (Authorization, Proxy-Authorization, X-Api-Key, Cookie, ...) loses its
// value; a list of name=value pairs (OTEL_EXPORTER_OTLP_HEADERS) its secret
// ones; JSON its secret keys; anything else is dropped.
func header(v string) string {
	if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") {
		return jsonValue(t)
	}
	if name, val, ok := strings.Cut(v, ":"); ok && name != "" && !strings.ContainsAny(name, " =,") {
		if SecretName(name) {
			return name + ": " + Mask
		}
		return name + ":" + value(val)
	}
	if strings.Contains(v, "=") {
		pairs := strings.Split(v, ",")
		for i, p := range pairs {
			name, val, ok := strings.Cut(p, "=")
			switch {
			case !ok:
				pairs[i] = Mask
			case SecretName(strings.TrimSpace(name)):
				pairs[i] = name + "=" + Mask
			default:
				pairs[i] = name + "=" + value(val)
			}
		}
		return strings.Join(pairs, ",")
	}
	return Mask
}
