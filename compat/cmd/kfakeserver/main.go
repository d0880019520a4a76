// Command kfakeserver runs franz-go's kfake (github.com/twmb/franz-go/pkg/kfake,
// the in-process fake Kafka cluster of franz-go's own tests) as a
// standalone single broker, so that `make bench-compare` can measure it
// with the same client, over the same loopback, as gregor and Apache
// Kafka. It is a tool of the compat module, never linked into gregor.
//
//	kfakeserver --port P [--data-dir DIR] [--sync-writes] [--partitions N]
//
// With --data-dir kfake persists to disk: each partition's batches are
// appended to segment files under DIR (raw RecordBatch bytes, with an
// in-memory per-batch index), and metadata and group state to append
// logs; without it everything lives in an in-memory file system. Writes
// are not fsynced per batch unless --sync-writes, as Kafka's default
// flush policy. It prints "kfake listening on host:port" on stdout once
// it serves and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "the loopback `port` to listen on; 0 picks a free one")
	dataDir := flag.String("data-dir", "", "persist segments and state in this `directory`; empty keeps everything in memory")
	syncWrites := flag.Bool("sync-writes", false, "fsync every batch (kfake.SyncWrites)")
	partitions := flag.Int("partitions", 1, "partitions of an auto-created topic")
	flag.Parse()
	if err := run(*port, *dataDir, *syncWrites, *partitions); err != nil {
		slog.Error("kfakeserver", "err", err)
		os.Exit(1)
	}
}

func run(port int, dataDir string, syncWrites bool, partitions int) error {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(partitions),
		kfake.AllowAutoTopicCreation(),
	}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	if syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	fmt.Printf("kfake listening on %s\n", c.ListenAddrs()[0])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}
