package monitor

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/onceflow/onceflow/engine"
)

// assets are the status page's files: index.html, app.js, app.css and the
// vendored uPlot (assets/vendor/uplot, with its LICENSE; fetched by
// scripts/vendor-web.sh). Nothing is loaded from elsewhere.
//
//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page only its own scripts, styles and
// JSON: no inline script or style, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageDoc is the document /api/page serves: everything the page draws.
type pageDoc struct {
	// Status is the document /status serves, at the same moment.
	Status Status `json:"status"`
	// From says where the figures come from: "query" (a running
	// process's listener) or "checkpoint" (onceflow checkpoint serve).
	From string `json:"from"`
	// Plan is what the query is made of (engine.Plan). From a
	// checkpoint, only what it records: sources, operators, sinks.
	Plan *engine.Plan `json:"plan,omitempty"`
	// History is how many batches the page keeps (WithHistory).
	History int `json:"history"`
	// Batches are the last History batches, oldest first.
	Batches []batchPoint `json:"batches"`
	// Note is a remark for people (e.g. why the state is unknown).
	Note string `json:"note,omitempty"`
}

// pageSource is what the page's handlers read: a running query's
// listener, or a checkpoint.
type pageSource interface {
	page(ctx context.Context) (pageDoc, error)
	// progress returns batch id's progress record, or nil when the
	// source has none for it.
	progress(ctx context.Context, id int64) (*engine.Progress, error)
}

// addPageRoutes serves the page of src on mux: / (the page), /assets/…,
// /api/page and /api/progress/{id}. Every response carries the
// Content-Security-Policy.
func addPageRoutes(mux *http.ServeMux, src pageSource) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", secure(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	}))
	mux.Handle("GET /assets/", secure(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.StripPrefix("/assets", files).ServeHTTP(w, r)
	}))
	mux.Handle("GET /api/page", secure(func(w http.ResponseWriter, r *http.Request) {
		doc, err := src.page(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, doc)
	}))
	mux.Handle("GET /api/progress/{id}", secure(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 0 {
			http.Error(w, fmt.Sprintf("monitor: /api/progress/%s: a batch id is a number ≥ 0", r.PathValue("id")), http.StatusBadRequest)
			return
		}
		p, err := src.progress(r.Context(), id)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case p == nil:
			http.Error(w, fmt.Sprintf("monitor: no progress record of batch %d here (the page keeps the last batches; older ones are in the checkpoint's progress/ until the retention purges them)", id), http.StatusNotFound)
		default:
			writeJSON(w, p)
		}
	}))
}

// secure sets the headers every page response carries.
func secure(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// page implements pageSource for a running query.
// The status and the batches are read under one lock, so the page's
// newest batch is the status' last progress.
func (l *Listener) page(context.Context) (pageDoc, error) {
	now := l.now()
	l.mu.Lock()
	st := l.stateLocked()
	doc := pageDoc{From: "query", Plan: l.mu.plan, History: l.historySize(), Batches: l.mu.history.points()}
	l.mu.Unlock()
	doc.Status = l.statusOf(st, now)
	return doc, nil
}

func (l *Listener) progress(_ context.Context, id int64) (*engine.Progress, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.history.get(id), nil
}

func (l *Listener) historySize() int {
	if l.historyN > 0 {
		return l.historyN
	}
	return DefaultHistory
}
