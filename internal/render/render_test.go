package render

import (
	"errors"
	"testing"
	"testing/fstest"
)

func TestRender(t *testing.T) {
	t.Parallel()
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tmpl, channel, locale string
		data                        map[string]any
		wantSubject, wantBody       string
		wantErr                     error
	}{
		{name: "SMS", tmpl: "order_shipped", channel: "sms", data: map[string]any{"order_id": "A-1001"},
			wantBody: "Your order A-1001 has shipped."},
		{name: "SMSOptionalParam", tmpl: "order_shipped", channel: "sms", data: map[string]any{"order_id": "A-1", "tracking_url": "https://t.example/1"},
			wantBody: "Your order A-1 has shipped. Track it: https://t.example/1"},
		{name: "EmailHasSubject", tmpl: "order_shipped", channel: "email", data: map[string]any{"order_id": "A-1001"},
			wantSubject: "Your order A-1001 has shipped", wantBody: "Hello,\n\nyour order A-1001 is on its way.\n\nThank you for your order."},
		{name: "LocaleRegionFallsBackToLanguage", tmpl: "order_shipped", channel: "sms", locale: "es-MX", data: map[string]any{"order_id": "B-2"},
			wantBody: "Tu pedido B-2 ha sido enviado."},
		{name: "UnknownLocaleFallsBackToDefault", tmpl: "order_shipped", channel: "sms", locale: "de", data: map[string]any{"order_id": "B-2"},
			wantBody: "Your order B-2 has shipped."},
		{name: "OTPDefaultMinutes", tmpl: "otp", channel: "sms", data: map[string]any{"code": "123456"},
			wantBody: "123456 is your verification code. It expires in 10 minutes. Do not share it."},
		{name: "MissingParam", tmpl: "order_shipped", channel: "sms", data: nil, wantErr: ErrMissingParam},
		{name: "UnknownTemplate", tmpl: "nope", channel: "sms", wantErr: ErrUnknownTemplate},
		{name: "TemplateNotForChannel", tmpl: "welcome", channel: "sms", wantErr: ErrUnknownTemplate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Render(tt.tmpl, tt.channel, tt.locale, tt.data)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Render error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got.Subject != tt.wantSubject || got.Body != tt.wantBody {
				t.Errorf("Render = %q / %q, want %q / %q", got.Subject, got.Body, tt.wantSubject, tt.wantBody)
			}
		})
	}
}

func TestRenderMissingParamNamesIt(t *testing.T) {
	t.Parallel()
	_, err := MustNew().Render("otp", "sms", "", map[string]any{})
	if err == nil || !errors.Is(err, ErrMissingParam) {
		t.Fatalf("err = %v", err)
	}
	if got := err.Error(); got != `render otp for sms: template parameter missing or invalid: map has no entry for key "code"` {
		t.Errorf("err = %q", got)
	}
}

func TestSubjectInjectionRejected(t *testing.T) {
	t.Parallel()
	r, err := newFromFS(fstest.MapFS{"t/x.email.tmpl": {Data: []byte("Subject: {{.s}}\n\nbody\n")}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Render("x", "email", "", map[string]any{"s": "hi\nBcc: evil@example.com"}); !errors.Is(err, ErrMissingParam) {
		t.Fatalf("err = %v, want ErrMissingParam", err)
	}
}

func TestBadTemplateFailsNew(t *testing.T) {
	t.Parallel()
	if _, err := newFromFS(fstest.MapFS{"t/x.sms.tmpl": {Data: []byte("{{.a")}}, "t"); err == nil {
		t.Fatal("New accepted a template that does not parse")
	}
}
