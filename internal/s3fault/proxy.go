package s3fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Action is what the proxy does to a request a rule picks.
type Action uint8

const (
	// InternalError answers 500 InternalError without forwarding.
	InternalError Action = iota + 1
	// SlowDown answers 503 SlowDown without forwarding.
	SlowDown
	// ResetBody resets the connection in the middle of a body: a request
	// that carries one (PUT, POST) is read halfway and never forwarded;
	// any other is forwarded and its response cut after half its body.
	ResetBody
	// Stall waits Rule.Stall (default 10s) before forwarding.
	Stall
	// LoseResponse forwards the request, so the server performs it, and
	// then resets the connection instead of answering.
	LoseResponse
)

var actionNames = map[Action]string{InternalError: "500", SlowDown: "503-slowdown", ResetBody: "reset", Stall: "stall", LoseResponse: "lose-response"}

func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// ParseAction parses 500, 503-slowdown, reset, stall or lose-response.
func ParseAction(s string) (Action, error) {
	for a, n := range actionNames {
		if n == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("s3fault: unknown action %q (want 500, 503-slowdown, reset, stall or lose-response)", s)
}

// DefaultStall is how long Stall waits when Rule.Stall is zero.
const DefaultStall = 10 * time.Second

// Rule picks requests and says what to do to them. A request is selected
// when its method is Method and its object key matches Key; selected
// requests are counted from 1 per rule, and number m gets the action when
// m >= Nth, fewer than Times actions came from the rule, and the seeded
// draw falls below Prob.
type Rule struct {
	// Method is the HTTP method ("PUT", "GET", "POST", "DELETE",
	// "HEAD"); empty means any.
	Method string
	// Key is a glob over the object key below the bucket (elements as
	// path.Match, "**" any number of them); empty means any request,
	// bucket-level ones (list, multi-delete) included.
	Key string
	// Nth is the first selected request that may get the action; zero
	// means 1.
	Nth int
	// Times is the most actions from this rule; zero means 1 when Prob is
	// 1, else no limit.
	Times int
	// Prob is the probability per selected request; zero means 1.
	Prob float64
	// Action is what happens.
	Action Action
	// Stall is how long Stall waits; zero means DefaultStall.
	Stall time.Duration
}

func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Action.String())
	if r.Method != "" {
		b.WriteString(" " + r.Method)
	}
	if r.Key != "" {
		b.WriteString(" " + r.Key)
	}
	if r.Nth > 1 {
		fmt.Fprintf(&b, " nth=%d", r.Nth)
	}
	if r.Times > 0 {
		fmt.Fprintf(&b, " times=%d", r.Times)
	}
	if r.Prob > 0 && r.Prob < 1 {
		fmt.Fprintf(&b, " p=%g", r.Prob)
	}
	return b.String()
}

// Event is one request the proxy acted on.
type Event struct {
	Seq    int
	Rule   int
	Method string
	Key    string
	Action Action
}

func (e Event) String() string {
	return fmt.Sprintf("s3fault: %s on %s %s (rule %d)", e.Action, e.Method, e.Key, e.Rule+1)
}

// Proxy is a fault-injecting reverse proxy in front of one S3 server, on a
// loopback port. It forwards requests with their Host header unchanged,
// so signatures made for the proxy's address stay valid.
type Proxy struct {
	target *url.URL
	srv    *http.Server
	ln     net.Listener
	rp     *httputil.ReverseProxy
	tr     *http.Transport
	seed   uint64

	mu struct {
		sync.Mutex
		rules    []Rule
		selected []int
		fired    []int
		seen     map[string]int
		events   []Event
		requests int
	}
}

// Start listens on 127.0.0.1 and forwards to target (an http URL such as
// ONCEFLOW_TEST_S3_ENDPOINT), with no rules yet.
func Start(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("s3fault: target %q is not an http URL with a host", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("s3fault: listen: %w", err)
	}
	p := &Proxy{target: u, ln: ln, seed: seed}
	p.tr = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// Not SetURL: it would replace the Host header the request
			// was signed with.
			r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
		},
		Transport: p.tr,
		// A client that gave up on a stalled request is no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.mu.seen = map[string]int{}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint, for s3store.Options.Endpoint or a
// location's ?endpoint=.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetRules replaces the rules and restarts their counts; no rules means
// every request passes (the fault clears).
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rules = append([]Rule(nil), rules...)
	p.mu.selected = make([]int, len(rules))
	p.mu.fired = make([]int, len(rules))
	p.mu.seen = map[string]int{}
}

// Events returns the requests acted on so far.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.mu.events...)
}

// Requests returns how many requests the proxy received.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.requests
}

// Close stops the proxy at once: connections are closed, stalled requests
// end.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// key returns the object key of a path-style request: the path after
// /bucket/, or "" for a bucket-level request.
func key(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/")
	_, k, _ := strings.Cut(p, "/")
	return k
}

// decide picks the rule, if any, that acts on r.
func (p *Proxy) decide(r *http.Request) (Rule, bool) {
	k := key(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.requests++
	for i, rule := range p.mu.rules {
		if rule.Method != "" && rule.Method != r.Method {
			continue
		}
		if rule.Key != "" && (k == "" || !matchKey(rule.Key, k)) {
			continue
		}
		p.mu.selected[i]++
		id := strconv.Itoa(i) + "/" + r.Method + "/" + k
		occ := p.mu.seen[id]
		p.mu.seen[id] = occ + 1
		times := rule.Times
		if times == 0 {
			times = 1
			if rule.Prob > 0 && rule.Prob < 1 {
				times = int(^uint(0) >> 1)
			}
		}
		if p.mu.selected[i] < max(rule.Nth, 1) || p.mu.fired[i] >= times {
			continue
		}
		if rule.Prob > 0 && rule.Prob < 1 && draw(p.seed, i, id, occ) >= rule.Prob {
			continue
		}
		p.mu.fired[i]++
		p.mu.events = append(p.mu.events, Event{Seq: len(p.mu.events) + 1, Rule: i, Method: r.Method, Key: k, Action: rule.Action})
		return rule, true
	}
	return Rule{}, false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	rule, ok := p.decide(r)
	if !ok {
		p.rp.ServeHTTP(w, r)
		return
	}
	switch rule.Action {
	case InternalError:
		s3Error(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case SlowDown:
		s3Error(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case Stall:
		d := rule.Stall
		if d == 0 {
			d = DefaultStall
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		p.rp.ServeHTTP(w, r)
	case ResetBody:
		if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
			n := r.ContentLength / 2
			if n <= 0 {
				n = 1
			}
			_, _ = io.CopyN(io.Discard, r.Body, n)
			reset(w)
			return
		}
		p.cutResponse(w, r)
	case LoseResponse:
		out := r.Clone(context.WithoutCancel(r.Context()))
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
		removeHopHeaders(out.Header)
		if resp, err := p.tr.RoundTrip(out); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		reset(w)
	}
}

// cutResponse forwards r and passes on half of the response body, then
// resets the connection.
func (p *Proxy) cutResponse(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	removeHopHeaders(out.Header)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		reset(w)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if n := resp.ContentLength / 2; n > 0 {
		_, _ = io.CopyN(w, resp.Body, n)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	reset(w)
}

// reset closes the client's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// s3Error answers with an S3 error document.
func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>s3fault</RequestId></Error>`, code, msg, r.URL.Path)
}

// matchKey reports whether k matches the glob pattern.
func matchKey(pattern, k string) bool {
	return matchElems(strings.Split(pattern, "/"), strings.Split(k, "/"))
}

func matchElems(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchElems(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// draw returns a deterministic number in [0, 1) for one request.
func draw(seed uint64, rule int, id string, occ int) float64 {
	h := mix(seed ^ uint64(rule)<<32)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 0x100000001b3
	}
	h = mix(h ^ uint64(occ))
	return float64(h>>11) / (1 << 53)
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
