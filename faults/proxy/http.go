package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// proxyJSON is a proxy in toxiproxy's JSON.
type proxyJSON struct {
	Name     string      `json:"name"`
	Listen   string      `json:"listen"`
	Upstream string      `json:"upstream"`
	Enabled  bool        `json:"enabled"`
	Toxics   []ToxicSpec `json:"toxics"`
}

func (p *Proxy) json() proxyJSON {
	t := p.Toxics()
	if t == nil {
		t = []ToxicSpec{}
	}
	return proxyJSON{Name: p.name, Listen: p.Addr(), Upstream: p.upstream, Enabled: p.Enabled(), Toxics: t}
}

// Handler serves toxiproxy's HTTP control API: GET /version, GET/POST
// /proxies, GET/POST/DELETE /proxies/{name}, GET/POST /proxies/{name}/toxics,
// GET/POST/DELETE /proxies/{name}/toxics/{toxic}, POST /reset. Kafka-aware
// toxics are further types on the same endpoints.
func (g *Group) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "cascade-proxy"})
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		if err := g.Reset(); err != nil {
			apiError(w, http.StatusInternalServerError, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /proxies", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]proxyJSON{}
		for _, p := range g.Proxies() {
			out[p.name] = p.json()
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /proxies", func(w http.ResponseWriter, r *http.Request) {
		in := struct {
			Name     string `json:"name"`
			Listen   string `json:"listen"`
			Upstream string `json:"upstream"`
			Enabled  *bool  `json:"enabled"`
		}{}
		if !readJSON(w, r, &in) {
			return
		}
		if in.Name == "" || in.Upstream == "" {
			apiError(w, http.StatusBadRequest, errors.New("proxy needs name and upstream"))
			return
		}
		if in.Listen == "" {
			in.Listen = "127.0.0.1:0"
		}
		p, err := g.Add(in.Name, in.Listen, in.Upstream)
		if err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		if in.Enabled != nil && !*in.Enabled {
			p.SetEnabled(false)
		}
		writeJSON(w, http.StatusCreated, p.json())
	})
	withProxy := func(h func(w http.ResponseWriter, r *http.Request, p *Proxy)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			p := g.Get(r.PathValue("name"))
			if p == nil {
				apiError(w, http.StatusNotFound, fmt.Errorf("proxy %s: %w", r.PathValue("name"), ErrNotFound))
				return
			}
			h(w, r, p)
		}
	}
	mux.HandleFunc("GET /proxies/{name}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		writeJSON(w, http.StatusOK, p.json())
	}))
	mux.HandleFunc("POST /proxies/{name}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		in := struct {
			Enabled *bool `json:"enabled"`
		}{}
		if !readJSON(w, r, &in) {
			return
		}
		if in.Enabled != nil {
			if err := p.SetEnabled(*in.Enabled); err != nil {
				apiError(w, http.StatusInternalServerError, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, p.json())
	}))
	mux.HandleFunc("DELETE /proxies/{name}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		if err := g.Remove(p.name); err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("GET /proxies/{name}/toxics", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		writeJSON(w, http.StatusOK, p.json().Toxics)
	}))
	mux.HandleFunc("POST /proxies/{name}/toxics", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		in := struct {
			ToxicSpec
			Toxicity *float64 `json:"toxicity"`
		}{}
		if !readJSON(w, r, &in) {
			return
		}
		spec := in.ToxicSpec
		if in.Toxicity != nil {
			spec.Toxicity = *in.Toxicity
		}
		if err := p.addToxic(spec, in.Toxicity != nil); err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		writeToxic(w, p, nameOr(spec))
	}))
	mux.HandleFunc("GET /proxies/{name}/toxics/{toxic}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		writeToxic(w, p, r.PathValue("toxic"))
	}))
	mux.HandleFunc("POST /proxies/{name}/toxics/{toxic}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		// As toxiproxy: an update replaces the attributes (and toxicity
		// when given) of an existing toxic.
		name := r.PathValue("toxic")
		var old *ToxicSpec
		for _, t := range p.Toxics() {
			if t.Name == name {
				old = &t
			}
		}
		if old == nil {
			apiError(w, http.StatusNotFound, fmt.Errorf("toxic %s: %w", name, ErrNotFound))
			return
		}
		in := struct {
			Attributes json.RawMessage `json:"attributes"`
			Toxicity   *float64        `json:"toxicity"`
		}{}
		if !readJSON(w, r, &in) {
			return
		}
		spec := *old
		if in.Attributes != nil {
			spec.Attributes = in.Attributes
		}
		if in.Toxicity != nil {
			spec.Toxicity = *in.Toxicity
		}
		if _, err := newToxic(spec, nil, true); err != nil {
			apiError(w, http.StatusBadRequest, err)
			return
		}
		if err := p.RemoveToxic(name); err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		if err := p.addToxic(spec, true); err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		writeToxic(w, p, name)
	}))
	mux.HandleFunc("DELETE /proxies/{name}/toxics/{toxic}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) {
		if err := p.RemoveToxic(r.PathValue("toxic")); err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return mux
}

func nameOr(s ToxicSpec) string {
	if s.Name != "" {
		return s.Name
	}
	stream := s.Stream
	if stream == "" {
		stream = Downstream
	}
	return s.Type + "_" + stream
}

func writeToxic(w http.ResponseWriter, p *Proxy, name string) {
	for _, t := range p.Toxics() {
		if t.Name == name {
			writeJSON(w, http.StatusOK, t)
			return
		}
	}
	apiError(w, http.StatusNotFound, fmt.Errorf("toxic %s: %w", name, ErrNotFound))
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrExists):
		return http.StatusConflict
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// apiError writes toxiproxy's error body.
func apiError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]any{"error": err.Error(), "status": status})
}
