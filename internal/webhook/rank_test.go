package webhook

import "testing"

func TestRank(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		channel string
		status  Status
		want    int
		wantOK  bool
	}{
		{"SMSAccepted", "sms", StatusAccepted, 1, true},
		{"SMSSent", "sms", StatusSent, 4, true},
		{"SMSUndelivered", "sms", StatusUndelivered, 6, true},
		{"SMSFailed", "sms", StatusFailed, 6, true},
		{"SMSDelivered", "sms", StatusDelivered, 7, true},
		{"SMSRead", "sms", StatusRead, 8, true},
		{"PushDelivered", "push", StatusDelivered, 7, true},
		{"EmailSent", "email", StatusSent, 4, true},
		{"EmailDelivered", "email", StatusDelivered, 5, true},
		{"EmailFailed", "email", StatusFailed, 7, true},
		{"EmailBounced", "email", StatusBounced, 8, true},
		{"EmailComplained", "email", StatusComplained, 9, true},
		{"SMSComplained", "sms", StatusComplained, 0, false},
		{"Unknown", "sms", Status("receiving"), 0, false},
		{"Empty", "email", Status(""), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Rank(tt.channel, tt.status)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Rank(%q, %q) = %d, %v; want %d, %v", tt.channel, tt.status, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestRankOrder checks the orderings the package promises, on every
// channel, independently of the exact numbers.
func TestRankOrder(t *testing.T) {
	t.Parallel()
	failures := []Status{StatusUndelivered, StatusFailed, StatusRejected, StatusCanceled, StatusBounced}
	rank := func(ch string, s Status) int {
		r, ok := Rank(ch, s)
		if !ok {
			t.Fatalf("Rank(%q, %q) unknown", ch, s)
		}
		return r
	}
	for _, ch := range []string{"sms", "email", "push"} {
		t.Run(ch, func(t *testing.T) {
			t.Parallel()
			progress := []Status{StatusAccepted, StatusQueued, StatusSending, StatusSent}
			for i := 1; i < len(progress); i++ {
				if got, prev := rank(ch, progress[i]), rank(ch, progress[i-1]); got <= prev {
					t.Errorf("rank(%s) = %d, want above rank(%s) = %d", progress[i], got, progress[i-1], prev)
				}
			}
			if d, s := rank(ch, StatusDelivered), rank(ch, StatusSent); d <= s {
				t.Errorf("delivered %d not above sent %d", d, s)
			}
			for _, f := range failures {
				if got, s := rank(ch, f), rank(ch, StatusSent); got <= s {
					t.Errorf("%s %d not above sent %d: a failure must be terminal over sent", f, got, s)
				}
			}
		})
	}
	if b, d := rank("email", StatusBounced), rank("email", StatusDelivered); b <= d {
		t.Errorf("email: bounced %d not above delivered %d", b, d)
	}
	if d, f := rank("sms", StatusDelivered), rank("sms", StatusFailed); d <= f {
		t.Errorf("sms: delivered %d not above failed %d", d, f)
	}
}
