package broker

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"github.com/gregorbroker/gregor/config"
)

// listen opens a client listener with Kafka's socket settings:
// socket.receive.buffer.bytes on the listening socket, before it is bound,
// so accepted sockets inherit it (and the window scale they negotiate
// allows it), and socket.listen.backlog.size as its accept queue.
func (s *Server) listen(l config.Listener) (net.Listener, error) {
	rcv := int(s.cfg.SocketReceiveBufferBytes)
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if rcv == -1 {
			return nil
		}
		return controlErr(c, func(fd uintptr) error { return setRecvBuffer(fd, rcv) })
	}}
	ln, err := lc.Listen(context.Background(), "tcp", l.Address())
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", l.Name, err)
	}
	if err := setBacklog(ln, int(s.cfg.SocketListenBacklogSize)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: socket.listen.backlog.size: %w", l.Name, err)
	}
	return ln, nil
}

// configureConn applies the settings of an accepted connection: no Nagle
// delay (as Kafka), and socket.send.buffer.bytes unless it is -1.
func (s *Server) configureConn(nc net.Conn) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	if err := tc.SetNoDelay(true); err != nil {
		return fmt.Errorf("set TCP_NODELAY: %w", err)
	}
	if n := s.cfg.SocketSendBufferBytes; n != -1 {
		if err := tc.SetWriteBuffer(int(n)); err != nil {
			return fmt.Errorf("set socket.send.buffer.bytes: %w", err)
		}
	}
	return nil
}

// controlErr runs fn on c's descriptor and returns either error.
func controlErr(c syscall.RawConn, fn func(fd uintptr) error) error {
	var ferr error
	if err := c.Control(func(fd uintptr) { ferr = fn(fd) }); err != nil {
		return err
	}
	return ferr
}
