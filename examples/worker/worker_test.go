package main

import (
	"strings"
	"testing"
	"time"
)

func TestSettings(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	w, err := settings(env("SENDONCE_QUEUE_URL", "https://q", "WORKER_POLLERS", "4", "WORKER_SEND_TIMEOUT", "30s", "WORKER_VISIBILITY", "2m"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Pollers != 4 || w.SendTimeout != 30*time.Second || w.Visibility != 2*time.Minute || w.Wait != 20*time.Second {
		t.Errorf("settings = %+v", w)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"NoQueue", nil, "SENDONCE_QUEUE_URL is required"},
		{"BadDuration", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_WAIT", "soon"}, `WORKER_WAIT="soon"`},
		{"LongWait", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_WAIT", "30s"}, "want 0 to 20s"},
		{"NoPollers", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_POLLERS", "0"}, "want at least 1"},
		{"VisibilityTooShort", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_SEND_TIMEOUT", "20s", "WORKER_VISIBILITY", "21s"}, "must exceed WORKER_SEND_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := settings(env(tc.env...)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("settings: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckDeadline(t *testing.T) {
	w := &Worker{SendTimeout: 14 * time.Second}
	if err := w.checkDeadline(0); err == nil {
		t.Error("14s accepted with the default 5s provider timeout: a takeover needs 15s")
	}
	w.SendTimeout = 15 * time.Second
	if err := w.checkDeadline(0); err != nil {
		t.Error(err)
	}
	if err := w.checkDeadline(10 * time.Second); err == nil {
		t.Error("15s accepted with a 10s provider timeout")
	}
}
