// Package pgfault is a TCP proxy for PostgreSQL tests that can lose the
// answer to COMMIT: it forwards the COMMIT to the server, waits until the
// server has answered it (the transaction is committed), and then resets
// the client's connection instead of passing the answer on. The client
// cannot tell whether its transaction committed, which is what a network
// failure at the worst moment looks like.
//
// It reads the protocol's message framing only: the startup packet, then
// one type byte and a length per message. It refuses SSL and GSS
// encryption requests itself (answering 'N'), so clients must allow a
// cleartext connection (sslmode=disable or prefer). A COMMIT is a simple
// query (what pgx's Tx.Commit sends) or a Parse of one followed by Sync;
// END, COMMIT WORK and COMMIT TRANSACTION count too.
//
// Lifecycle: Start, connect clients to Addr, LoseCommits to arm, Close.
// Safe for concurrent use. Only tests use it.
package pgfault

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

const (
	sslRequest    = 80877103
	gssRequest    = 80877104
	cancelRequest = 80877102
)

// Proxy forwards connections from a loopback port to one server.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		commits int // COMMITs seen
		from    int // the COMMIT number from which answers are lost (0: none)
		left    int // answers still to lose
		lost    int
		conns   map[net.Conn]struct{}
		closed  bool
	}
}

// Start listens on 127.0.0.1 and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgfault: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port, to put in a connection URL in place of
// the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseCommits arms the proxy: counting from now, the nth COMMIT and the
// times-1 after it lose their answers. LoseCommits(0, 0) disarms it.
func (p *Proxy) LoseCommits(nth, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.from, p.mu.left = 0, 0
	if nth > 0 && times > 0 {
		p.mu.from, p.mu.left = p.mu.commits+nth, times
	}
}

// Commits returns how many COMMITs passed through the proxy.
func (p *Proxy) Commits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.commits
}

// Lost returns how many COMMIT answers the proxy withheld.
func (p *Proxy) Lost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.lost
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.mu.closed = true
	for c := range p.mu.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		_ = c.Close()
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// commit counts one COMMIT and reports whether its answer is lost.
func (p *Proxy) commit() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.commits++
	if p.mu.left > 0 && p.mu.commits >= p.mu.from {
		p.mu.left--
		p.mu.lost++
		return true
	}
	return false
}

// session is one client connection and its server connection.
type session struct {
	client, server net.Conn
	mu             sync.Mutex
	lose           bool // drop the server's answers up to ReadyForQuery, then reset
}

func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	s := &session{client: client, server: server}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.fromServer()
	}()
	p.fromClient(s)
	_ = server.Close()
	_ = client.Close()
	<-done
}

// fromClient forwards the client's messages, watching for COMMIT.
func (p *Proxy) fromClient(s *session) {
	// Startup: length, code, rest; encryption requests are refused here.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(s.client, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		if n < 8 || n > 1<<20 {
			return
		}
		rest := make([]byte, n-8)
		if _, err := io.ReadFull(s.client, rest); err != nil {
			return
		}
		if code == sslRequest || code == gssRequest {
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := s.server.Write(append(hdr[:], rest...)); err != nil {
			return
		}
		if code == cancelRequest {
			_, _ = io.Copy(s.server, s.client)
			return
		}
		break
	}
	parsedCommit := false
	for {
		typ, body, err := readMessage(s.client)
		if err != nil {
			return
		}
		switch typ {
		case 'Q':
			if isCommit(cstring(body)) && p.commit() {
				s.arm()
			}
		case 'P':
			_, query, _ := bytes.Cut(body, []byte{0}) // statement name, then the query
			parsedCommit = parsedCommit || isCommit(cstring(query))
		case 'S':
			if parsedCommit {
				parsedCommit = false
				if p.commit() {
					s.arm()
				}
			}
		}
		if err := writeMessage(s.server, typ, body); err != nil {
			return
		}
	}
}

func (s *session) arm() {
	s.mu.Lock()
	s.lose = true
	s.mu.Unlock()
}

func (s *session) losing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lose
}

// fromServer forwards the server's messages; once a lost COMMIT is armed
// it withholds them and, at the server's ReadyForQuery (the COMMIT is
// done), resets both connections.
func (s *session) fromServer() {
	for {
		typ, body, err := readMessage(s.server)
		if err != nil {
			_ = s.client.Close()
			return
		}
		if s.losing() {
			if typ == 'Z' {
				if tc, ok := s.client.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				_ = s.client.Close()
				_ = s.server.Close()
				return
			}
			continue
		}
		if err := writeMessage(s.client, typ, body); err != nil {
			return
		}
	}
}

func readMessage(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("pgfault: bad message length")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}

func writeMessage(w io.Writer, typ byte, body []byte) error {
	msg := make([]byte, 5+len(body))
	msg[0] = typ
	binary.BigEndian.PutUint32(msg[1:5], uint32(4+len(body)))
	copy(msg[5:], body)
	_, err := w.Write(msg)
	return err
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// isCommit reports whether a statement commits a transaction.
func isCommit(q string) bool {
	q = strings.ToUpper(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(q), ";")))
	switch q {
	case "COMMIT", "END", "COMMIT WORK", "COMMIT TRANSACTION", "END WORK", "END TRANSACTION":
		return true
	}
	return false
}
