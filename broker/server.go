// Package broker is Gregor's Kafka server: listeners, connections, one file
// per API key (00_produce.go, 01_fetch.go, ...), and the partitions this
// node hosts. It reads cluster metadata from raftmeta and partition data
// from storage. Its machinery is in packages under broker/internal, each
// with one job, none of which imports this one: partition (a hosted
// partition and its append path), replica (the follower's fetcher), fetch
// (fetch sessions and zero-copy sends), interbroker (requests to other
// brokers), coordhost (the coordinators on their partitions), logmaint
// (background log maintenance), connlimit (connection quotas) and dirlock
// (the data dirs' locks).
package broker

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/connlimit"
	"github.com/gregorbroker/gregor/broker/internal/dirlock"
	"github.com/gregorbroker/gregor/broker/internal/fetch"
	"github.com/gregorbroker/gregor/broker/internal/interbroker"
	"github.com/gregorbroker/gregor/broker/internal/logmaint"
	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/internal/replica"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// Options are the parts of a Server that tests replace.
type Options struct {
	Logger *slog.Logger
	// FS reaches the data dirs; default vfs.Default. Whatever it is, the
	// dirs' .lock files are taken on the real file system
	// (broker/internal/dirlock).
	FS  vfs.FS
	Now func() time.Time // default time.Now
	// CopyFetch sends fetched records through a buffer in user space
	// even where sendfile could send them from the segment file (for
	// benchmarks that compare the two).
	CopyFetch bool
	// ScramCredentials is where SASL/SCRAM looks users up; nil is the
	// credentials in the metadata log (security.go).
	ScramCredentials ScramCredentials
	// HTTPHandler, when set, serves every path of http.listener that
	// /metrics, /healthz and /readyz leave (the web console, which
	// cmd/gregor builds: the broker knows nothing of it).
	HTTPHandler http.Handler
}

// Server is one Gregor node: the broker and, in combined mode, the
// controller.
type Server struct {
	cfg  *config.Broker
	log  *slog.Logger
	fs   vfs.FS
	now  func() time.Time
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	versions *protocol.Versions
	meta     *raftmeta.Node
	ctrl     controller.API
	quorum   *raftnode.TCPTransport // nil on a single node
	ctrlLn   net.Listener           // the controller listener, when this node is a controller in a quorum
	epoch    atomic.Int64           // this broker's epoch from its registration
	logs     *storage.Manager
	parts    partitionTable
	sessions *fetch.Sessions
	groups   *groupCoordinator
	txns     *txnCoordinator
	shares   *shareCoordinator
	connIDs  atomic.Uint64    // numbers connections (conn.id)
	fetchers *replica.Manager // the follower side of replication

	// interBroker and toController secure the connections this node
	// opens to the inter-broker and controller listeners (peer_security.go);
	// metaStarted is set once meta is, for the controller listener's
	// authorization, which runs on the transport's goroutines.
	interBroker, toController *peerSecurity
	metaStarted               atomic.Bool

	// addSender asks transaction coordinators to verify or add partitions
	// (KIP-890, broker/internal/interbroker).
	addSender *interbroker.AddSender

	offlineDirs logDirHealth // log dirs a disk error took offline (produce_helpers.go)

	// heartbeatNow asks heartbeatLoop for a heartbeat at once: the
	// connection to the active controller closed, and the controller
	// fences a broker that does not come back within
	// broker.disconnect.grace.ms. Made with the quorum transport.
	heartbeatNow chan struct{}

	// produceWaits are the acks=all produces waiting for followers,
	// answered when the server closes (shutdown_produce.go).
	produceWaits produceWaits

	// maint runs the background log maintenance (broker/internal/logmaint),
	// from when the logs are open.
	maint *logmaint.Maintainer

	// dirLocks are the held .lock files of the data dirs
	// (broker/internal/dirlock).
	dirLocks []*vfs.DirLock

	producerIDs *producerstate.IDAllocator

	// createdConfigs is the configs CreateTopics answers for a topic
	// without overrides (defaultTopicConfigs).
	createdConfigsOnce sync.Once
	createdConfigs     []kmsg.CreateTopicsResponseTopicConfig

	reconcileMu sync.Mutex
	// swept is set, under reconcileMu, once a reconcile has checked every
	// log for deletion without a failure (metadata_sync.go).
	swept bool
	// reconciled is, under reconcileMu, the image the partition table was
	// last made from, when every log of it was made; nil otherwise. The
	// next reconcile looks only at the topics changed since
	// (metadata_sync.go).
	reconciled *image.Image
	// reconcileLooked is how many topics the last reconcile looked at,
	// under reconcileMu: the changed ones, not every topic (a test reads it).
	reconcileLooked int

	// partEnv is what the hosted partitions need of the server.
	partEnv *partition.Env

	// copyFetch turns the zero-copy fetch path off (Options.CopyFetch).
	copyFetch bool

	// quotas are max.connections and max.connections.per.ip (broker/internal/connlimit).
	quotas *connlimit.Quotas

	netLimits netLimits // broker-wide request budgets (conn_limits.go)

	// byteQuotas are the client byte-rate quotas (quota.go).
	byteQuotas clientQuotas
	// connRates are max.connection.creation.rate (conn_rate.go).
	connRates connRates

	// security secures the SSL and SASL client listeners, by name
	// (security.go).
	security map[string]*listenerSecurity

	// auditLog is the authorizer's decisions (component=authorizer), as
	// Kafka's kafka.authorizer.logger (authz.go).
	auditLog *slog.Logger

	// ops are the metrics and the HTTP listener (ops_http.go).
	ops opsState
	// acls is the authorizer (authz.go), nil without authorizer.class.name.
	acls *aclState

	// closing is closed when Close begins (with closed set), and
	// connsExpired when closeConns' deadline passes: between the two, a
	// connection's writer sends every response its requests will have
	// instead of abandoning those not ready yet (conn.go, writeLoop).
	closing, connsExpired chan struct{}
	// hookAnswered, when set (tests only), runs between a waiting
	// request's answer and its hand-over to the connection's writer:
	// the window Close must not lose an answer in.
	hookAnswered atomic.Pointer[func()]
	// prechecked holds the verdicts a Produce frame's precheck found
	// while it arrived, for its handler (produce_precheck.go).
	prechecked prechecked

	mu        sync.Mutex // guards listeners and conns
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	closed    bool
}

// New opens the data directories and the metadata log, and registers this
// node. It does not listen yet: call Start.
func New(cfg *config.Broker, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      opts.Logger,
		fs:       opts.FS,
		now:      opts.Now,
		ctx:      ctx,
		stop:     stop,
		versions: &supportedVersions,
		conns:    make(map[net.Conn]struct{}),

		closing:      make(chan struct{}),
		connsExpired: make(chan struct{}),
	}
	s.auditLog = s.log.With("component", "authorizer")
	s.copyFetch = opts.CopyFetch
	s.ops.extra = opts.HTTPHandler
	s.newMetrics()
	s.byteQuotas = newClientQuotas(cfg.QuotaWindowNum, cfg.QuotaWindowSizeSeconds)
	s.connRates = newConnRates(cfg)
	scram := opts.ScramCredentials
	if scram == nil {
		scram = imageScram{image: func() *image.Image {
			if s.meta == nil {
				return nil
			}
			return s.meta.Image()
		}}
	}
	// The controller listeners are secured as the others are: the quorum
	// transport runs secureConn before its own handshake.
	sec, err := newListenerSecurity(cfg, cfg.Listeners, scram, s.log)
	if err != nil {
		stop()
		return nil, err
	}
	s.security = sec
	if s.interBroker, err = newPeerSecurity(cfg.InterBrokerSecurity()); err != nil {
		stop()
		return nil, err
	}
	if s.toController, err = newPeerSecurity(cfg.ControllerSecurity()); err != nil {
		stop()
		return nil, err
	}
	if s.acls, err = newACLState(cfg.Authorizer); err != nil {
		closeListenerSecurity(sec)
		stop()
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	s.logAuthorizer()
	s.partEnv = &partition.Env{FS: s.fs, Log: s.log, Now: s.now, Ctx: s.ctx, Go: s.goTracked, Cfg: cfg, StorageFailed: s.storageFailed}
	quotas, err := connlimit.New(cfg, len(s.clientListeners()))
	if err != nil {
		stop()
		return nil, err
	}
	s.quotas = quotas
	s.sessions = fetch.NewSessions(int(cfg.MaxIncrementalFetchSessionCacheSlots))
	s.fetchers = replica.NewManager(replica.Deps{
		Cfg: cfg, Image: func() *image.Image { return s.meta.Image() },
		Ctx: ctx, Go: s.goTracked, Logger: s.log,
		BrokerEpoch: s.ownBrokerEpoch, Partition: s.parts.get,
		DirOffline: s.dirOffline, StorageFailed: s.storageFailed,
		Checkpoint: func() error { return s.logs.Checkpoint() },
		Secure:     s.interBroker.kgoOpts(),
		Replicated: s.ops.metrics.Replicated,
	})
	s.addSender = interbroker.NewAddSender(interbroker.AddDeps{
		Self: cfg.NodeID, Listener: cfg.InterBrokerListenerName,
		Image: func() *image.Image { return s.meta.Image() },
		Ctx:   ctx, Go: s.goTracked,
		CoordinatorNode: s.txnCoordinatorNode,
		Local: func(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
			return s.txns.coord.AddPartitionsToTxn(ctx, req)()
		},
		Secure: s.interBroker.kgoOpts(),
	})
	if err := s.open(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) open() error {
	if len(s.cfg.LogDirs) == 0 {
		return errors.New("log.dirs is empty")
	}
	locks, err := dirlock.Lock(s.cfg, s.log)
	if err != nil {
		return err
	}
	s.dirLocks = locks
	clusterID, err := resolveClusterID(s.fs, s.cfg)
	if err != nil {
		return err
	}
	s.logs, err = storage.OpenManager(storage.ManagerConfig{
		FS:        s.fs,
		Dirs:      s.cfg.LogDirs,
		NodeID:    s.cfg.NodeID,
		ClusterID: clusterID,
		Logger:    s.log,
		Now:       s.now,
		// Recovery runs before the metadata log is read, so it indexes
		// with the broker defaults; a topic's own index.interval.bytes
		// applies from its first append after start.
		TopicConfig: func(string) storage.LogConfig { return logConfig(s.cfg.TopicConfig(nil)) },
		Decompress: func(c protocol.Codec, b []byte) ([]byte, error) {
			return protocol.Decompress(c, b, int(s.cfg.SocketRequestMaxBytes))
		},
		Compress: protocol.Compress,
		// The transaction index is rebuilt from the producer snapshots'
		// ongoing transactions (broker/internal/partition).
		ProducerSnapshotTxns: producerstate.OngoingTransactions,
	})
	if err != nil {
		return fmt.Errorf("open log dirs: %w", err)
	}
	s.maint = logmaint.New(logmaint.Deps{
		Cfg: s.cfg, FS: s.fs, Logs: s.logs, Ctx: s.ctx, Go: s.goTracked, Logger: s.log, Now: s.now,
		Partitions:    func() iter.Seq[*partition.Partition] { return eachHostedPartition(s.parts.load()) },
		Partition:     s.parts.get,
		StorageFailed: s.storageFailed,
	})
	if err := s.startMetadata(clusterID); err != nil {
		return err
	}
	s.startProducerIDs()
	if err := s.startGroupCoordinator(); err != nil {
		return err
	}
	if err := s.startTxnCoordinator(); err != nil {
		return err
	}
	if err := s.startShareCoordinator(); err != nil {
		return err
	}
	if err := s.reconcile(s.meta.Image()); err != nil && !errors.As(err, new(*createLogsError)) {
		// Logs that could not be created are retried (metadata_sync.go).
		return err
	}
	s.goTracked(s.watchMetadata)
	s.goTracked(s.maint.FlushLoop)
	s.goTracked(s.maint.FlushScheduler)
	s.goTracked(s.maint.EpochCheckpointLoop)
	s.goTracked(s.maint.RetentionLoop)
	s.goTracked(s.isrLoop)
	if s.cfg.LogCleanerEnable {
		s.maint.StartCleaner()
	}
	return nil
}

// startProducerIDs sets up the allocator that InitProducerId hands ids
// from: blocks of 1,000 ids recorded in the metadata log, so ids stay
// unique across restarts.
func (s *Server) startProducerIDs() {
	s.producerIDs = producerstate.NewIDAllocator(func(ctx context.Context) (int64, int64, error) {
		return s.ctrl.AllocateProducerIDs(ctx, s.cfg.NodeID)
	})
}

func voterIDs(cfg *config.Broker) []uint64 {
	var ids []uint64
	for id := range cfg.ControllerQuorumVoters {
		ids = append(ids, uint64(id))
	}
	if len(ids) == 0 {
		ids = []uint64{uint64(cfg.NodeID)}
	}
	return ids
}

// register records this broker and its listeners in the metadata log. A
// single node is its own controller, so this waits for it to lead.
func (s *Server) register() error {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	ctx, stopWatch := s.watchOtherClusters(ctx)
	defer stopWatch()
	rec := image.RegisterBrokerRecord{BrokerID: s.cfg.NodeID, IncarnationID: newUUID()}
	for _, l := range s.advertised() {
		if l.Host == "" {
			// As Kafka: an empty host advertises this machine's name.
			if h, err := os.Hostname(); err == nil {
				l.Host = h
			}
		}
		rec.Listeners = append(rec.Listeners, image.Listener{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: config.SecurityProtocolID(s.cfg.ListenerSecurityProtocolMap[l.Name])})
	}
	for {
		epoch, err := s.ctrl.RegisterBroker(ctx, rec)
		if err == nil {
			s.epoch.Store(epoch)
			return nil
		}
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errOtherClusters) {
				return cause
			}
			return fmt.Errorf("register broker %d: %w", s.cfg.NodeID, err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// advertised is the set of listeners clients are told about: the
// configured advertised.listeners, else the client listeners as bound (so
// a port 0 in the configuration advertises the port the system chose).
func (s *Server) advertised() []config.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	bound := make(map[string]int)
	for i, l := range s.clientListeners() {
		if i < len(s.listeners) {
			bound[l.Name] = s.listeners[i].Addr().(*net.TCPAddr).Port
		}
	}
	out := slices.Clone(s.cfg.AdvertisedListeners)
	if len(out) == 0 {
		out = s.clientListeners()
	}
	for i := range out {
		// Port 0 asks the system for a port: advertise the one it gave.
		if p, ok := bound[out[i].Name]; ok && out[i].Port == 0 {
			out[i].Port = p
		}
	}
	return out
}

// clientListeners are the configured listeners minus the controller ones.
func (s *Server) clientListeners() []config.Listener {
	var out []config.Listener
	for _, l := range s.cfg.Listeners {
		if !s.isControllerListener(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

func (s *Server) isControllerListener(name string) bool {
	for _, n := range s.cfg.ControllerListenerNames {
		if n == name {
			return true
		}
	}
	return false
}

// Start listens on the client listeners, registers this broker with their
// addresses, and serves connections.
func (s *Server) Start() error {
	s.startHTTP()
	listeners := s.clientListeners()
	for _, l := range listeners {
		ln, err := s.listen(l)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, ln)
		s.mu.Unlock()
	}
	if err := s.register(); err != nil {
		return err
	}
	if s.inQuorum() {
		s.goTracked(s.heartbeatLoop)
		s.waitUnfenced(15 * time.Second)
	}
	for i, ln := range s.listeners {
		name := listeners[i].Name
		s.goTracked(func() { s.acceptLoop(ln, name) })
	}
	s.ops.serving.Store(true)
	return nil
}

// Addr is the address of the first client listener, once started.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.listeners) == 0 {
		return nil
	}
	return s.listeners[0].Addr()
}

func (s *Server) acceptLoop(ln net.Listener, listener string) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept", "err", err)
				select {
				case <-time.After(10 * time.Millisecond):
					continue
				case <-s.ctx.Done():
				}
			}
			return
		}
		if !s.throttleAccept(listener) {
			nc.Close()
			return
		}
		addr := connlimit.RemoteAddr(nc)
		if !s.admit(nc, listener, addr) {
			if s.ctx.Err() != nil || s.isClosed() {
				return
			}
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			s.quotas.Release(listener, addr)
			return
		}
		s.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.goTracked(func() {
			s.serveConn(nc, listener, func() {
				s.mu.Lock()
				delete(s.conns, nc)
				s.mu.Unlock()
				s.quotas.Release(listener, addr)
			})
		})
	}
}

// admit counts an accepted connection against the connection limits,
// waiting while the broker is at max.connections, and configures its
// socket. A connection it refuses is closed.
func (s *Server) admit(nc net.Conn, listener string, addr netip.Addr) bool {
	return s.admitTo(s.quotas, nc, listener, addr) == nil
}

// admitTo is admit against the quotas q (the controller listener has its
// own, controller_listener.go). It returns why a connection was refused:
// connlimit.ErrTooManyFromIP, net.ErrClosed once q is closed, or the socket
// configuration's error.
func (s *Server) admitTo(q *connlimit.Quotas, nc net.Conn, listener string, addr netip.Addr) error {
	err := q.Acquire(listener, addr)
	if errors.Is(err, connlimit.ErrTooManyFromIP) {
		// As Kafka's Acceptor: an info line, and the socket closed.
		s.log.Info("rejected connection: the address already has its maximum of connections",
			"ip", addr, "max", q.LimitFor(addr), "listener", listener)
	}
	if err != nil {
		nc.Close()
		return err
	}
	// IP connection-rate quotas are the brokers' client listeners', not
	// the controller listener's.
	if q == s.quotas {
		if err := s.ipRateAdmit(nc, listener, addr); err != nil {
			q.Release(listener, addr)
			return err
		}
	}
	if err := s.configureConn(nc); err != nil {
		s.log.Error("configure accepted connection; closing it", "ip", addr, "err", err)
		nc.Close()
		q.Release(listener, addr)
		return err
	}
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// goTracked starts fn in a goroutine that Close waits for.
func (s *Server) goTracked(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// Close stops listening, closes every connection, and shuts the metadata
// log and the partition logs down cleanly (checkpoints written), so the
// next start scans nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	for _, ln := range s.listeners {
		ln.Close()
	}
	conns := make([]net.Conn, 0, len(s.conns))
	for nc := range s.conns {
		conns = append(conns, nc)
	}
	s.mu.Unlock()
	s.quotas.Close() // an acceptor waiting for a slot gives up
	// Produces waiting for followers are answered before their
	// connections close (shutdown_produce.go).
	s.produceWaits.answerAll(5 * time.Second)
	s.closeConns(conns, 2*time.Second)
	s.controlledShutdown()
	// The quorum's listener goes only after the controlled shutdown,
	// which may need this node's vote; its Serve loop is one of the
	// goroutines waited for below.
	s.stop()
	if s.ctrlLn != nil {
		s.ctrlLn.Close()
	}
	s.wg.Wait()
	closeListenerSecurity(s.security)
	s.addSender.Close()
	var errs []error
	if s.shares != nil {
		s.shares.coord.Close()
		s.shares.persister.clients.Close()
		s.shares.forward.Close()
	}
	if s.txns != nil {
		s.txns.coord.Close()
	}
	if s.groups != nil {
		s.groups.coord.Close()
	}
	if s.producerIDs != nil {
		s.producerIDs.Close()
	}
	if s.maint != nil {
		// Set once the logs are open; without it no partition was made.
		errs = append(errs, s.maint.WriteProducerSnapshots())
		errs = append(errs, s.maint.WriteDeferredEpochs())
	}
	if s.meta != nil {
		errs = append(errs, s.meta.Close())
	}
	if s.quorum != nil {
		errs = append(errs, s.quorum.Close())
	}
	if s.fetchers != nil {
		s.fetchers.Close()
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	dirlock.Unlock(s.dirLocks, s.log)
	s.dirLocks = nil
	return errors.Join(errs...)
}
