package broker

import (
	"errors"
	"net"
	"sync"

	"github.com/gregorbroker/gregor/broker/internal/connlimit"
	"github.com/gregorbroker/gregor/config"
)

// listenControllerSocket opens the controller listener as Kafka's
// controller SocketServer does its own: the socket settings of the other
// listeners (socket.receive.buffer.bytes and socket.listen.backlog.size
// here, socket.send.buffer.bytes and TCP_NODELAY on each accepted socket),
// and connection quotas of its own — max.connections,
// max.connections.per.ip and its overrides counted apart from the
// broker's listeners, as the controller's ConnectionQuotas are.
func (s *Server) listenControllerSocket(l config.Listener) (net.Listener, error) {
	q, err := connlimit.New(s.cfg, 1)
	if err != nil {
		return nil, err
	}
	ln, err := s.listen(l)
	if err != nil {
		return nil, err
	}
	return &quotaListener{Listener: ln, s: s, q: q, name: l.Name}, nil
}

// quotaListener admits each accepted connection through its quotas
// before the quorum transport sees it; a connection over its address's
// limit is closed and the next one accepted.
type quotaListener struct {
	net.Listener
	s    *Server
	q    *connlimit.Quotas
	name string
}

// Accept waits for a connection the quotas admit. While the listener is
// at max.connections it accepts nothing, leaving the kernel's backlog to
// hold new connections, as Kafka's acceptor does.
func (l *quotaListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := connlimit.RemoteAddr(nc)
		if err := l.s.admitTo(l.q, nc, l.name, addr); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			continue
		}
		return &quotaConn{Conn: nc, release: sync.OnceFunc(func() { l.q.Release(l.name, addr) })}, nil
	}
}

// Close stops accepting, waking an Accept waiting for a slot.
func (l *quotaListener) Close() error {
	err := l.Listener.Close()
	l.q.Close()
	return err
}

// quotaConn gives its quota slot back when it is closed, once.
type quotaConn struct {
	net.Conn
	release func()
}

func (c *quotaConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
