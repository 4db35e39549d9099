package webhook

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
)

// DefaultMaxBody is the largest callback body accepted (after base64
// decoding); a larger one is answered 413. Real callbacks are under 2 KB.
const DefaultMaxBody = 64 << 10

// Config configures a Handler.
type Config struct {
	// Ledger receives delivery statuses. Required.
	Ledger ledger.Ledger
	// Dedup remembers handled callbacks. Required.
	Dedup Dedup
	// HTTPSecret is the generic provider's callback HMAC secret. Empty
	// disables /callbacks/http (404).
	HTTPSecret []byte
	// TwilioAuthToken is the Twilio account's auth token. Empty disables
	// /callbacks/twilio (404).
	TwilioAuthToken string
	// PublicBaseURL is the scheme and host (and any path prefix a proxy
	// strips) under which Twilio reaches this function, e.g.
	// "https://hooks.example.com". The URL Twilio signed is PublicBaseURL
	// + the request's raw path + "?" + its raw query. Empty means
	// "https://" + the request's Host header (the Function URL's domain).
	PublicBaseURL string
	// Tolerance is the generic signature's replay window (0: 5 minutes).
	Tolerance time.Duration
	// MaxBody caps the body size (0: DefaultMaxBody).
	MaxBody int
	// Metrics receives the webhook's counters (nil: metrics.Discard).
	Metrics metrics.Recorder
	// Logger receives one line per callback (nil: discard).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Handler serves provider delivery callbacks. It is safe for concurrent
// use.
type Handler struct {
	cfg Config
}

// New returns a Handler for cfg. It returns an error if Ledger or Dedup
// is missing, or if PublicBaseURL is not an absolute http(s) URL. A
// provider without its secret is not served (404): a deployment whose
// providers send no callbacks (SNS, SMTP) runs the webhook with none.
func New(cfg Config) (*Handler, error) {
	if cfg.Ledger == nil || cfg.Dedup == nil {
		return nil, errors.New("webhook: a ledger and a dedup store are required")
	}
	if cfg.PublicBaseURL != "" {
		u, err := url.Parse(cfg.PublicBaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("webhook: public base URL %q is not an absolute http(s) URL without a query", cfg.PublicBaseURL)
		}
		cfg.PublicBaseURL = strings.TrimSuffix(cfg.PublicBaseURL, "/")
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = httpprovider.DefaultTolerance
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	cfg.Metrics = cmp.Or(cfg.Metrics, metrics.Discard)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg}, nil
}

// Effect is what handling a verified callback did to the ledger; it is
// the "status" of the answer.
type Effect string

// The effects; each is answered 200.
const (
	// Applied: the status was written to the ledger row.
	Applied Effect = "applied"
	// Duplicate: the callback was handled before.
	Duplicate Effect = "duplicate"
	// OutOfOrder: the row already had an equal or higher status; nothing
	// changed.
	OutOfOrder Effect = "out_of_order"
	// UnknownKey: no live ledger row has the callback's key.
	UnknownKey Effect = "unknown_key"
	// Ignored: the status is not one the ledger tracks.
	Ignored Effect = "ignored"
)

// Handle answers one Function URL request. API Gateway HTTP API (payload
// 2.0) events have the same JSON shape and are served alike. It never
// returns an error: every failure is an HTTP answer whose body is
// {"error": "..."} with generic text; details go to the log.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	prov, ok := route(path)
	if !ok || !h.serves(prov) {
		return errorResponse(http.StatusNotFound, "not found"), nil
	}
	log := h.cfg.Logger.With("provider", string(prov), "correlation_id", req.RequestContext.RequestID)
	if req.RequestContext.HTTP.Method != http.MethodPost {
		resp := errorResponse(http.StatusMethodNotAllowed, "method not allowed")
		resp.Headers["Allow"] = http.MethodPost
		return resp, nil
	}
	body, status := h.body(req)
	if status != 0 {
		h.invalid(prov, "body")
		log.WarnContext(ctx, "callback rejected", "reason", "body", "http_status", status)
		return errorResponse(status, http.StatusText(status)), nil
	}

	var cb Callback
	var err error
	switch prov {
	case ProviderHTTP:
		cb, err = h.verifyHTTP(req, body)
	case ProviderTwilio:
		cb, err = h.verifyTwilio(req, body)
	}
	switch {
	case errors.Is(err, ErrUnauthorized):
		h.invalid(prov, "signature")
		log.WarnContext(ctx, "callback rejected", "reason", "signature", "error", err)
		return errorResponse(http.StatusUnauthorized, "invalid signature"), nil
	case errors.Is(err, ErrMalformed):
		h.invalid(prov, "malformed")
		log.WarnContext(ctx, "callback rejected", "reason", "malformed", "error", err)
		return errorResponse(http.StatusBadRequest, "malformed callback"), nil
	case errors.Is(err, ErrIgnoredStatus):
		h.invalid(prov, "ignored_status")
		log.InfoContext(ctx, "callback ignored", "error", err)
		return okResponse(Ignored), nil
	case err != nil:
		log.ErrorContext(ctx, "callback failed", "error", err)
		return errorResponse(http.StatusInternalServerError, "internal error"), nil
	}
	if cb.At.IsZero() {
		cb.At = h.cfg.Now().UTC()
	}

	log = log.With("key", cb.Key, "status", string(cb.Status), "event", cb.DedupID())
	out, err := h.Apply(ctx, cb)
	if err != nil {
		log.ErrorContext(ctx, "callback failed", "error", err)
		return errorResponse(http.StatusInternalServerError, "internal error"), nil
	}
	log.InfoContext(ctx, "callback handled", "outcome", string(out))
	return okResponse(out), nil
}

// Apply deduplicates cb and applies its status to the ledger. See the
// package doc for the order of the steps and why a crash between them
// loses nothing. It returns an error only when the dedup store or the
// ledger failed; the caller answers 500 and the provider retries.
func (h *Handler) Apply(ctx context.Context, cb Callback) (Effect, error) {
	m, dim := h.cfg.Metrics, metrics.Dim{Name: "provider", Value: string(cb.Provider)}
	id := cb.DedupID()

	seen, err := h.cfg.Dedup.Seen(ctx, id)
	if err != nil {
		return "", err
	}
	if seen {
		m.Count(metrics.DuplicateCallbacks, 1, dim)
		return Duplicate, nil
	}

	rec, err := h.cfg.Ledger.Get(ctx, cb.Key)
	if errors.Is(err, ledger.ErrNotFound) {
		m.Count(metrics.InvalidCallbacks, 1, dim, metrics.Dim{Name: "reason", Value: "unknown_key"})
		return UnknownKey, nil
	}
	if err != nil {
		return "", fmt.Errorf("webhook: read ledger row %s: %w", cb.Key, err)
	}
	rank, ok := Rank(rec.Channel, cb.Status)
	if !ok { // parsers only produce known statuses; kept as a guard
		m.Count(metrics.InvalidCallbacks, 1, dim, metrics.Dim{Name: "reason", Value: "ignored_status"})
		return Ignored, nil
	}

	// Step 1: apply. The ledger only writes over a lower rank, so applying
	// the same callback again is a no-op.
	applied := false
	if rank > rec.DeliveryRank {
		applied, err = h.cfg.Ledger.ApplyDelivery(ctx, cb.Key, ledger.Delivery{
			Status:            string(cb.Status),
			Rank:              rank,
			At:                cb.At,
			ProviderMessageID: cb.ProviderMessageID,
		})
		if errors.Is(err, ledger.ErrNotFound) {
			m.Count(metrics.InvalidCallbacks, 1, dim, metrics.Dim{Name: "reason", Value: "unknown_key"})
			return UnknownKey, nil
		}
		if err != nil {
			return "", fmt.Errorf("webhook: apply %s to %s: %w", cb.Status, cb.Key, err)
		}
		if !applied {
			// Another writer got there between our read and our write
			// (often a concurrent delivery of this very callback): read
			// what it wrote to tell a duplicate from a late status.
			if rec, err = h.cfg.Ledger.Get(ctx, cb.Key); err != nil {
				return "", fmt.Errorf("webhook: reread ledger row %s: %w", cb.Key, err)
			}
		}
	}
	if applied {
		m.Count(metrics.CallbacksApplied, 1, dim)
	}
	// The row already holds exactly this status: this event was applied by
	// an earlier delivery whose dedup record was never written (a crash
	// or an error after step 1).
	reapplied := !applied && rec.DeliveryRank == rank && rec.DeliveryStatus == string(cb.Status)

	// Step 2: record, so later deliveries stop at Seen.
	created, err := h.cfg.Dedup.Record(ctx, cb)
	if err != nil {
		return "", err
	}
	switch {
	case applied:
		return Applied, nil
	case !created || reapplied:
		m.Count(metrics.DuplicateCallbacks, 1, dim)
		return Duplicate, nil
	default:
		m.Count(metrics.OutOfOrderCallbacks, 1, dim)
		return OutOfOrder, nil
	}
}

// route maps a path ending in /callbacks/{provider} (a stage or proxy
// prefix before it is allowed, as is one trailing slash) to the provider.
func route(path string) (Provider, bool) {
	i := strings.LastIndex(strings.TrimSuffix(path, "/"), "/callbacks/")
	if i < 0 {
		return "", false
	}
	name := strings.TrimSuffix(path[i+len("/callbacks/"):], "/")
	switch p := Provider(name); p {
	case ProviderHTTP, ProviderTwilio:
		return p, true
	}
	return "", false
}

func (h *Handler) serves(p Provider) bool {
	switch p {
	case ProviderHTTP:
		return len(h.cfg.HTTPSecret) > 0
	case ProviderTwilio:
		return h.cfg.TwilioAuthToken != ""
	}
	return false
}

// body returns the raw request body, base64-decoded if the event says so,
// or the HTTP status to answer: 413 when too large, 400 when the base64
// does not decode.
func (h *Handler) body(req events.LambdaFunctionURLRequest) ([]byte, int) {
	if !req.IsBase64Encoded {
		if len(req.Body) > h.cfg.MaxBody {
			return nil, http.StatusRequestEntityTooLarge
		}
		return []byte(req.Body), 0
	}
	if len(req.Body) > base64.StdEncoding.EncodedLen(h.cfg.MaxBody) {
		return nil, http.StatusRequestEntityTooLarge
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, http.StatusBadRequest
	}
	if len(b) > h.cfg.MaxBody {
		return nil, http.StatusRequestEntityTooLarge
	}
	return b, 0
}

// verifyHTTP checks the generic provider's signature over the raw body,
// then parses it.
func (h *Handler) verifyHTTP(req events.LambdaFunctionURLRequest, body []byte) (Callback, error) {
	sig := header(req.Headers, httpprovider.SignatureHeader)
	if err := httpprovider.Verify(h.cfg.HTTPSecret, sig, body, h.cfg.Now(), h.cfg.Tolerance); err != nil {
		return Callback{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return ParseHTTPCallback(body)
}

// verifyTwilio checks Twilio's signature over the public URL and the form
// parameters, then parses them. A body that is not form-encoded cannot
// carry a valid signature and is refused as unauthorized.
func (h *Handler) verifyTwilio(req events.LambdaFunctionURLRequest, body []byte) (Callback, error) {
	sig := header(req.Headers, TwilioSignatureHeader)
	if sig == "" {
		return Callback{}, fmt.Errorf("%w: no %s header", ErrUnauthorized, TwilioSignatureHeader)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Callback{}, fmt.Errorf("%w: body is not form-encoded", ErrUnauthorized)
	}
	if err := VerifyTwilio(h.cfg.TwilioAuthToken, h.publicURL(req), form, sig); err != nil {
		return Callback{}, err
	}
	query, err := url.ParseQuery(req.RawQueryString)
	if err != nil {
		return Callback{}, fmt.Errorf("%w: query string does not parse", ErrMalformed)
	}
	return ParseTwilioCallback(query, form, header(req.Headers, TwilioIdempotencyHeader))
}

// publicURL reconstructs the URL the caller posted to (see
// Config.PublicBaseURL).
func (h *Handler) publicURL(req events.LambdaFunctionURLRequest) string {
	base := h.cfg.PublicBaseURL
	if base == "" {
		host := header(req.Headers, "Host")
		if host == "" {
			host = req.RequestContext.DomainName
		}
		base = "https://" + host
	}
	u := base + req.RawPath
	if req.RawQueryString != "" {
		u += "?" + req.RawQueryString
	}
	return u
}

func (h *Handler) invalid(p Provider, reason string) {
	h.cfg.Metrics.Count(metrics.InvalidCallbacks, 1,
		metrics.Dim{Name: "provider", Value: string(p)}, metrics.Dim{Name: "reason", Value: reason})
}

// header returns the value of header name, matched case-insensitively
// (Function URLs lower-case names; other sources may not).
func header(hs map[string]string, name string) string {
	if v, ok := hs[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range hs {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func okResponse(o Effect) events.LambdaFunctionURLResponse {
	return jsonResponse(http.StatusOK, map[string]string{"status": string(o)})
}

func errorResponse(code int, msg string) events.LambdaFunctionURLResponse {
	return jsonResponse(code, map[string]string{"error": msg})
}

func jsonResponse(code int, v map[string]string) events.LambdaFunctionURLResponse {
	b, _ := json.Marshal(v)
	return events.LambdaFunctionURLResponse{
		StatusCode: code,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}
}
