package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

func (s *Simulator) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sim/stats", s.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	}))
	mux.HandleFunc("GET /_sim/delivered", s.auth(func(w http.ResponseWriter, r *http.Request) {
		if ref := r.URL.Query().Get("reference"); ref != "" {
			writeJSON(w, http.StatusOK, map[string]any{"reference": ref, "delivered": s.Delivered(ref)})
			return
		}
		dups := s.Duplicates()
		if dups == nil {
			dups = []string{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"delivered": s.DeliveredAll(), "duplicates": dups})
	}))
	mux.HandleFunc("GET /_sim/messages", s.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Messages())
	}))
	mux.HandleFunc("GET /_sim/faults", s.auth(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		random := s.random
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"faults": s.Faults(), "random": random})
	}))
	mux.HandleFunc("POST /_sim/faults", s.auth(func(w http.ResponseWriter, r *http.Request) {
		raw, err := readAdmin(w, r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		var faults []Fault
		if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
			err = json.Unmarshal(raw, &faults)
		} else {
			var f Fault
			err = json.Unmarshal(raw, &f)
			faults = []Fault{f}
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "faults: "+err.Error())
			return
		}
		for _, f := range faults {
			if err := f.validate(); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		for _, f := range faults {
			s.AddFault(f)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("DELETE /_sim/faults", s.auth(func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST /_sim/random", s.auth(func(w http.ResponseWriter, r *http.Request) {
		raw, err := readAdmin(w, r)
		var rf RandomFaults
		if err == nil {
			err = json.Unmarshal(raw, &rf)
		}
		if err == nil {
			err = s.SetRandom(rf)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "random: "+err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST /_sim/latency", s.auth(func(w http.ResponseWriter, r *http.Request) {
		raw, err := readAdmin(w, r)
		var v struct{ Fixed, Jitter string }
		if err == nil {
			err = json.Unmarshal(raw, &v)
		}
		var fixed, jitter time.Duration
		if err == nil {
			fixed, err = parseDur("fixed", v.Fixed)
		}
		if err == nil {
			jitter, err = parseDur("jitter", v.Jitter)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "latency: "+err.Error())
			return
		}
		s.SetLatency(fixed, jitter)
		w.WriteHeader(http.StatusNoContent)
	}))
}

func readAdmin(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("body larger than %d bytes", tooBig.Limit)
	}
	return raw, err
}
