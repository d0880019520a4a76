package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// The metadata quorum. A single node (one voter, itself) runs the metadata
// log with no network: it is its own controller. In a quorum
// (controller.quorum.voters lists several, or this node is a broker
// only), controllers talk raft over the controller listener, brokers join
// as learners, every controller request goes to the active controller
// through a ControllerClient, and brokers heartbeat to stay unfenced.

// inQuorum reports whether this node is part of a multi-node cluster.
func (s *Server) inQuorum() bool {
	return len(s.cfg.ControllerQuorumVoters) > 1 || !s.cfg.IsController()
}

func (s *Server) startMetadata(clusterID string) error {
	cfg := raftmeta.Config{
		NodeID:    uint64(s.cfg.NodeID),
		Voters:    voterIDs(s.cfg),
		Dir:       s.cfg.MetadataDir(),
		FS:        s.fs,
		Logger:    s.log,
		ClusterID: clusterID,
		Observer:  !s.cfg.IsController(),
	}
	if s.inQuorum() {
		peers := make(map[uint64]string)
		for id, addr := range s.cfg.ControllerQuorumVoters {
			peers[uint64(id)] = addr
		}
		tcfg := raftnode.TransportConfig{
			NodeID: uint64(s.cfg.NodeID), ClusterID: clusterID, Peers: peers,
			Bootstrap: s.cfg.ControllerQuorumBootstrapServers, Logger: s.log.With("component", "quorum"),
		}
		s.heartbeatNow = make(chan struct{}, 1)
		tcfg.RPCConnLost = func(uint64) {
			select {
			case s.heartbeatNow <- struct{}{}:
			default: // one is already asked for
			}
		}
		// The quorum speaks the controller listener's security protocol:
		// this node dials with the first controller listener's client
		// settings and secures what it accepts as that listener serves.
		if s.toController.tls != nil || s.toController.mechanism != nil {
			tcfg.SecureDial = s.toController.secureDial
		}
		for _, l := range s.cfg.Listeners {
			if s.isControllerListener(l.Name) { // the one listenController serves
				if s.security[l.Name] != nil {
					tcfg.SecureAccept = s.secureControllerConn(l.Name)
				}
				break
			}
		}
		tr, err := raftnode.NewTCPTransport(tcfg)
		if err != nil {
			return fmt.Errorf("metadata quorum transport: %w", err)
		}
		s.quorum = tr
		cfg.Transport = tr
		cfg.Controller = controller.Config{
			BrokerSessionTimeout:               time.Duration(s.cfg.BrokerSessionTimeoutMs) * time.Millisecond,
			BrokerDisconnectGrace:              time.Duration(s.cfg.BrokerDisconnectGraceMs) * time.Millisecond,
			BrokerHeartbeatInterval:            time.Duration(s.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond,
			UncleanLeaderElection:              s.cfg.UncleanLeaderElectionEnable,
			AutoLeaderRebalance:                s.cfg.AutoLeaderRebalanceEnable,
			LeaderImbalanceCheckInterval:       time.Duration(s.cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
			LeaderImbalancePerBrokerPercentage: s.cfg.LeaderImbalancePerBrokerPercentage,
		}
		if s.cfg.IsController() {
			if err := s.listenController(); err != nil {
				return err
			}
		}
	}
	var err error
	s.meta, err = raftmeta.Start(cfg)
	if err != nil {
		return fmt.Errorf("start metadata log: %w", err)
	}
	s.metaStarted.Store(true)
	s.ctrl = controller.NewClient(s.meta, s.quorum)
	return nil
}

// listenController serves the quorum on the controller listener, with
// the socket settings and connection limits of the other listeners
// (controller_listener.go).
func (s *Server) listenController() error {
	for _, l := range s.cfg.Listeners {
		if !s.isControllerListener(l.Name) {
			continue
		}
		ln, err := s.listenControllerSocket(l)
		if err != nil {
			return err
		}
		s.ctrlLn = ln
		tr := s.quorum
		s.goTracked(func() {
			if err := tr.Serve(ln); err != nil && s.ctx.Err() == nil {
				s.log.Error("controller listener", "err", err)
			}
		})
		return nil
	}
	return errors.New("no controller listener: set listeners and controller.listener.names")
}

// heartbeatLoop keeps this broker registered and unfenced: every
// broker.heartbeat.interval.ms it tells the active controller how far it
// has applied the metadata log, and registers again when the controller
// no longer knows its epoch. A log dir going offline sends one at once,
// and so does a closed connection to the controller, which fences a
// broker that stays away longer than broker.disconnect.grace.ms.
func (s *Server) heartbeatLoop() {
	interval := time.Duration(s.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.heartbeat(false); err != nil && s.ctx.Err() == nil {
			s.log.Warn("broker heartbeat", "err", err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.offlineDirs.changed():
		case <-s.heartbeatNow:
		}
	}
}

func (s *Server) heartbeat(shutdown bool) error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	res, err := s.ctrl.BrokerHeartbeat(ctx, controller.BrokerHeartbeat{
		BrokerID: s.cfg.NodeID, BrokerEpoch: s.epoch.Load(),
		CurrentMetadataOffset: int64(s.meta.Image().Offset()), WantShutdown: shutdown,
		OfflinePartitions: s.offlinePartitions(),
	})
	if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
		return s.register()
	}
	if err != nil {
		return err
	}
	if shutdown && !res.ShouldShutdown {
		return errors.New("controller has not released this broker yet")
	}
	return nil
}

// waitUnfenced waits until the controller has unfenced this broker, so
// clients are not told about a broker that cannot lead yet. It waits for
// the unfencing of this registration (its epoch) in the local image: after
// a restart the image replayed from disk still holds the previous
// registration, unfenced, and the metadata from before the crash, which
// must not be served (Kafka's brokers likewise wait for their initial
// unfencing before they take requests).
func (s *Server) waitUnfenced(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, ok := s.meta.Image().Broker(s.cfg.NodeID); ok && b.Epoch == s.epoch.Load() && !b.Fenced {
			return
		}
		if err := s.heartbeat(false); err != nil && s.ctx.Err() == nil {
			s.log.Debug("heartbeat while fenced", "err", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.log.Warn("still fenced after start-up wait; serving anyway")
}

// controlledShutdown tells the controller this broker is leaving, so its
// partitions get new leaders before it stops answering (Kafka's controlled
// shutdown). Bounded: a controller that cannot be reached does not hold
// the shutdown.
func (s *Server) controlledShutdown() {
	if !s.inQuorum() || s.ctrl == nil || s.epoch.Load() == 0 {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.heartbeat(true); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
