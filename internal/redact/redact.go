// Package redact keeps secrets on a command line out of what specprobe
// exports and logs. Inference servers take API keys and tokens as flags
// (--api-key sk-..., HF_TOKEN=... through env), and model URLs may carry
// credentials (https://user:pass@host/...).
package redact

import (
	"fmt"
	"net/url"
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

// secretName matches the names of flags and variables that hold secrets.
var secretName = regexp.MustCompile(`(?i)(key|token|secret|passw|pwd|auth|credential|cookie|session)`)

// userinfo matches the credentials part of a URL.
var userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@`)

// Args returns args with every secret value replaced by Mask: the value of
// a flag or variable named like a secret (--api-key=X, --token X,
// HF_TOKEN=X), credentials in URLs, and secret-named URL query parameters.
func Args(args []string) []string {
	out := make([]string, len(args))
	next := false // the previous argument was a secret flag without a value
	for i, a := range args {
		switch {
		case next && !strings.HasPrefix(a, "--"):
			out[i], next = Mask, false
			continue
		case next:
			next = false
		}
		name, _, hasValue := strings.Cut(a, "=")
		bare := strings.TrimLeft(name, "-")
		switch {
		case hasValue && bare != "" && !strings.ContainsAny(bare, "/:") && secretName.MatchString(bare):
			out[i] = name + "=" + Mask
			continue
		case !hasValue && strings.HasPrefix(a, "-") && secretName.MatchString(bare):
			out[i], next = a, true
			continue
		}
		out[i] = urls(a)
	}
	return out
}

// urls masks credentials and secret query parameters in the URLs of a.
func urls(a string) string {
	a = userinfo.ReplaceAllString(a, "${1}"+Mask+"@")
	if !strings.Contains(a, "://") || !strings.Contains(a, "?") {
		return a
	}
	u, err := url.Parse(a)
	if err != nil || u.RawQuery == "" {
		return a
	}
	q := u.Query()
	changed := false
	for k := range q {
		if secretName.MatchString(k) {
			q.Set(k, Mask)
			changed = true
		}
	}
	if !changed {
		return a
	}
	u.RawQuery = q.Encode()
	return u.String()
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
