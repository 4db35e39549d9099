package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

func noenv(string) string { return "" }

func TestRunServes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	stderr := &testsupport.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, func(k string) string {
			if k == "PROVIDER_SIM_TOKEN" {
				return "env-token"
			}
			return ""
		}, outW, stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the address: %v (stderr %s)", err, stderr.String())
	}
	base := strings.TrimSpace(line)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want http://127.0.0.1:PORT", base)
	}
	go io.Copy(io.Discard, outR)
	p, err := httpprovider.New(httpprovider.Config{BaseURL: base, Token: "env-token", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m := provider.Message{Key: "k", Channel: "sms", To: "+15551234567", Body: "hi"}
	rc, err := p.Send(ctx, m)
	if err != nil || rc.MessageID != "msg_1" {
		t.Fatalf("Send = %+v, %v, want msg_1", rc, err)
	}
	got, err := p.Lookup(ctx, m)
	if err != nil || got.Status != provider.LookupAccepted {
		t.Errorf("Lookup = %+v, %v, want accepted", got, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit status = %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop after ctx was canceled")
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"NoToken", []string{"-addr", "127.0.0.1:0"}, 2},
		{"BadFlag", []string{"-token", "t", "-nope"}, 2},
		{"ExtraArgs", []string{"-token", "t", "extra"}, 2},
		{"CannotListen", []string{"-token", "t", "-addr", "256.0.0.1:1"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr testsupport.Buffer
			got := run(context.Background(), tt.args, noenv, io.Discard, &stderr)
			if got != tt.want {
				t.Errorf("run(%v) = %d, want %d (stderr %s)", tt.args, got, tt.want, stderr.String())
			}
			if stderr.String() == "" {
				t.Errorf("stderr is empty, want an explanation")
			}
		})
	}
}
