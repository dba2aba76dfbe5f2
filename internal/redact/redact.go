// Package redact masks what must never reach a log, a span or a client:
// passwords in URLs, credentials in text, secrets the config holds, and a
// provider's echo of the prompt it was sent (CONTRACT §14).
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask is what a hidden secret is replaced by.
const Mask = "xxxxx"

// URL returns raw with the password of its user info, and the value of any
// query parameter whose name says it is secret, replaced by Mask. A string
// that does not parse as a URL is masked as text (Secrets).
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return Secrets(raw)
	}
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretName.MatchString(k) {
				q[k] = []string{Mask}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw // unchanged, and as written (url.String would rewrite memory:// as memory:)
	}
	return u.String()
}

// secretName is a parameter or header name whose value is a secret.
var secretName = regexp.MustCompile(`(?i)pass|secret|token|api[_-]?key|^key$|auth|credential`)

// SecretName reports whether a header or parameter name says that its value
// is a secret (Authorization, api-key, X-Api-Key, sentinel_password, ...).
func SecretName(name string) bool { return secretName.MatchString(name) }

// The credential shapes Secrets masks.
var (
	// OpenAI, Anthropic, OpenRouter, ... keys: sk-..., sk-ant-..., sk-or-...
	skKey = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{2,}`)
	// Other providers' key shapes: Groq (gsk_), Google (AIza), xAI (xai-),
	// Perplexity (pplx-), Hugging Face (hf_), Replicate (r8_), GitHub
	// (ghp_, github_pat_), AWS access keys (AKIA, ASIA). Each prefix is
	// followed by a long run, so that no ordinary word matches.
	vendorKey = regexp.MustCompile(`\b(?:gsk_|AIza|xai-|pplx-|hf_|r8_|ghp_|github_pat_)[A-Za-z0-9_\-]{16,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)
	// An HTTP authorization value: Bearer <token>, Basic <credentials>.
	authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+|%20)[A-Za-z0-9._~+/=\-]{2,}`)
	// key=value and "key": "value" pairs whose key names a secret. The
	// value does not end with a colon: "password=x: the reason" keeps its
	// ": " as it reads.
	secretPair = regexp.MustCompile(`(?i)((?:x-)?api[_-]?key|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret|password|passwd|pwd)("?\s*[:=]\s*"?)([^\s"'&,;}\]]*[^\s"'&,;}\]:])`)
	// The password of a URL's user info: scheme://user:password@host.
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@`)
)

// Secrets returns s with anything that looks like a credential masked:
// sk-... keys, Bearer and Basic credentials, api_key=... and similar
// pairs, and the passwords of URLs.
func Secrets(s string) string {
	if s == "" {
		return s
	}
	s = userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	s = skKey.ReplaceAllString(s, "sk-"+Mask)
	s = vendorKey.ReplaceAllString(s, Mask)
	s = authScheme.ReplaceAllString(s, "${1} "+Mask)
	s = secretPair.ReplaceAllString(s, "${1}${2}"+Mask)
	return s
}

// ipAddr is an IPv4 address, with its port if it has one, or a bracketed
// IPv6 one with its port.
var ipAddr = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\](?::\d{1,5})?`)

// hostPort is a host name with a port (internal-lb.corp.local:8443,
// localhost:9000): how a backend names another. A public URL a provider
// points to (its docs) names no port, and stays.
var hostPort = regexp.MustCompile(`\b(?:localhost|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+):\d{1,5}\b`)

// Addresses returns s with its IP addresses and host:port pairs replaced
// by Mask: a provider's error text may name the addresses of its own
// network, which a client must not see (CONTRACT §14).
func Addresses(s string) string {
	return hostPort.ReplaceAllString(ipAddr.ReplaceAllString(s, Mask), Mask)
}

// Known returns s with every occurrence of each known secret (an API key
// from the config, whatever its shape) replaced by Mask. Secrets shorter
// than 6 bytes are left alone: masking them would mangle ordinary words
// and they are no secret worth the name.
func Known(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) >= 6 && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	return s
}
