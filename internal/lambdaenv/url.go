package lambdaenv

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckURL reports whether raw, the value of the variable name, is a URL a
// deployment may send messages, tokens or callbacks to: https://, or plain
// http:// only for a loopback host (127.0.0.0/8, ::1, localhost), which
// local runs and tests use. It also refuses a URL without a host, with
// credentials in it (secrets come from SSM or Secrets Manager, never from
// a URL) or of another scheme.
//
// The error names the variable and shows only the URL's scheme and host,
// never its path or query.
func CheckURL(name, raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return fmt.Errorf("%s is not a URL", name)
	}
	shown := u.Scheme + "://" + u.Host
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%s: scheme %q is not https", name, u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("%s=%q has no host", name, shown)
	case u.User != nil:
		return fmt.Errorf("%s=%q holds credentials: give them through their own variable (or its _PARAM)", name, shown)
	case u.Scheme == "http" && !Loopback(u.Hostname()):
		return fmt.Errorf("%s=%q is plain http: use https (plain http is allowed only to a loopback host: 127.0.0.0/8, ::1, localhost)", name, shown)
	}
	return nil
}

// Loopback reports whether host (without a port) is localhost or an IP
// address in 127.0.0.0/8 or ::1.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL returns the variable's value (empty when unset), recording an error
// when it is set and CheckURL refuses it.
func (e *Env) URL(name string) string {
	v := strings.TrimSpace(e.Getenv(name))
	if v == "" {
		return ""
	}
	if err := CheckURL(name, v); err != nil {
		e.record(err)
	}
	return v
}
