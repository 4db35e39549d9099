package lambdaenv

import (
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	good := []string{
		"https://gw.example.com", "https://gw.example.com:8443/v1/", "HTTPS://GW.EXAMPLE.COM",
		"http://127.0.0.1:9/", "http://127.8.9.10", "http://[::1]:8080/x", "http://localhost:3000", "http://LocalHost",
	}
	for _, u := range good {
		if err := CheckURL("X_URL", u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
	bad := map[string]string{
		"http://gw.example.com":            "plain http",
		"http://10.0.0.5:8080":             "plain http",
		"http://128.0.0.1":                 "plain http",
		"http://[::2]":                     "plain http",
		"http://localhost.example.com":     "plain http",
		"http://127.0.0.1.nip.io":          "plain http",
		"ftp://gw.example.com":             "not https",
		"gw.example.com":                   "not https",
		"https://":                         "no host",
		"https://user:secret@gw.example":   "credentials",
		"https://gw.example.com/%zz":       "not a URL",
		"http://gw.example.com/?token=abc": "plain http",
	}
	for u, want := range bad {
		err := CheckURL("X_URL", u)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "X_URL") {
			t.Errorf("CheckURL(%q) = %v, want an error naming X_URL and saying %q", u, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "token=abc") {
			t.Errorf("CheckURL(%q) = %v: shows credentials or the query", u, err)
		}
	}
}

func TestEnvURL(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"OK": "https://hooks.example.com", "LOCAL": "http://127.0.0.1:1", "PLAIN": "http://hooks.example.com"}
	e := New(func(k string) string { return vars[k] })
	if e.URL("OK") != vars["OK"] || e.URL("LOCAL") != vars["LOCAL"] || e.URL("UNSET") != "" || e.Err() != nil {
		t.Fatalf("URL of good values: Err = %v", e.Err())
	}
	e.URL("PLAIN")
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "PLAIN") {
		t.Errorf("Err = %v, want PLAIN refused", err)
	}
}
