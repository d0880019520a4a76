package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/config"
)

const containerUsage = `usage: gregor container [--mounted-config FILE] [--secrets-dir DIR]
                        [--final-config FILE] [--data-dir DIR]

The image's entrypoint (Dockerfile). It configures a node from its
environment as the apache/kafka image does, so that a compose file written
for Kafka runs with only the image name changed:

  - every KAFKA_<NAME> variable is the property <name>, lower-cased, with
    "_" read as ".", "__" as "_" and "___" as "-"
    (KAFKA_NODE_ID=1 is node.id=1, KAFKA_LISTENER_SECURITY_PROTOCOL_MAP is
    listener.security.protocol.map);
  - a server.properties mounted at /mnt/shared/config/server.properties
    is the base the variables add to;
  - without KAFKA_LISTENERS, the listeners are the advertised ones bound
    on 0.0.0.0;
  - KAFKA_PROCESS_ROLES needs CLUSTER_ID (default 5L6g3nShT-eMCtK--X86sw,
    as Kafka's image), with which the log dirs are formatted on first
    start;
  - KAFKA_SSL_KEYSTORE_FILENAME and the *_CREDENTIALS variables name
    files in /etc/kafka/secrets, as in Kafka's image.

With none of these it runs a single node on 0.0.0.0:9092 advertised as
localhost:9092, metrics, health and the web console on 0.0.0.0:9644
(KAFKA_HTTP_LISTENER sets http.listener otherwise; KAFKA_HTTP_CONSOLE_ENABLE=false
or KAFKA_HTTP_CONSOLE_READ_ONLY=true for http.console.*), data in
/var/lib/gregor/data. The JVM's variables
(KAFKA_HEAP_OPTS, KAFKA_JMX_OPTS, ...) mean nothing to gregor: each one set
is named in a warning; KAFKA_OPTS with a JAAS file is refused (set the
listener's sasl.jaas.config property instead).

flags (the image's paths by default):
`

// containerPaths are where the image keeps its files; tests point them
// elsewhere.
type containerPaths struct {
	mounted string // a user's server.properties, if mounted
	secrets string // keystores and credential files
	final   string // the properties the node runs with, written here
	data    string // log.dirs when nothing sets it
}

var imagePaths = containerPaths{
	mounted: "/mnt/shared/config/server.properties",
	secrets: "/etc/kafka/secrets",
	final:   "/var/lib/gregor/config/server.properties",
	data:    "/var/lib/gregor/data",
}

// defaultContainerClusterID is the cluster id Kafka's image uses when
// CLUSTER_ID is not set (its configureDefaults).
const defaultContainerClusterID = "5L6g3nShT-eMCtK--X86sw"

// jvmOnlyEnv are the variables Kafka's image reads for the JVM, its
// launcher or log4j rather than as properties (KafkaDockerWrapper's
// ExcludeServerPropsEnv).
var jvmOnlyEnv = []string{
	"KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS",
	"KAFKA_JMX_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS",
	"KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
	"KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT",
}

// containerSetup is what runContainer starts a node with.
type containerSetup struct {
	serveArgs []string
	clusterID string   // format the log dirs with this id first; "" not
	warnings  []string // variables set that have no effect
}

func containerCommand() *command {
	return &command{name: "container", short: "the Docker image's entrypoint: configure a node from KAFKA_* variables and run it",
		raw: func(args []string, _ io.Reader, _, errOut io.Writer) error {
			fs := flag.NewFlagSet("container", flag.ContinueOnError)
			fs.SetOutput(errOut)
			fs.Usage = func() {
				fmt.Fprint(errOut, containerUsage)
				fs.PrintDefaults()
			}
			paths := imagePaths
			fs.StringVar(&paths.mounted, "mounted-config", paths.mounted, "a server.properties the variables add to, used `file` if it exists")
			fs.StringVar(&paths.secrets, "secrets-dir", paths.secrets, "the `directory` of keystores and credential files")
			fs.StringVar(&paths.final, "final-config", paths.final, "where the node's server.properties is written (`file`)")
			fs.StringVar(&paths.data, "data-dir", paths.data, "log.dirs when no variable sets it (`directory`)")
			if err := fs.Parse(args); err != nil {
				return err
			}
			if fs.NArg() > 0 {
				return usagef("container: unexpected argument %q; it reads the environment (gregor container -h)", fs.Arg(0))
			}
			return runContainer(os.Environ(), paths, errOut)
		}}
}

// runContainer configures the node from env, formats it when the
// environment names a cluster, and serves until SIGINT or SIGTERM.
func runContainer(env []string, paths containerPaths, errOut io.Writer) error {
	setup, err := containerConfig(env, paths)
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	for _, w := range setup.warnings {
		fmt.Fprintf(errOut, "gregor container: %s\n", w)
	}
	if setup.clusterID != "" {
		cfg, _, err := serveConfig(setup.serveArgs)
		if err != nil {
			return fmt.Errorf("container: %w", err)
		}
		if _, err := broker.Format(nil, cfg, setup.clusterID, true, time.Now()); err != nil {
			return fmt.Errorf("container: format: %w", err)
		}
	}
	return runServe(setup.serveArgs, errOut)
}

// containerConfig turns the environment into the node's server.properties
// (written to paths.final) and the arguments of serve.
func containerConfig(environ []string, paths containerPaths) (containerSetup, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var setup containerSetup
	if opts := env["KAFKA_OPTS"]; strings.Contains(opts, "java.security.auth.login.config") {
		return setup, errors.New("KAFKA_OPTS names a JAAS file, which gregor does not read: " +
			"set KAFKA_LISTENER_NAME_<LISTENER>_<MECHANISM>_SASL_JAAS_CONFIG (listener.name.<listener>.<mechanism>.sasl.jaas.config) instead")
	}
	for _, k := range jvmOnlyEnv {
		if v, ok := env[k]; ok && v != "" {
			setup.warnings = append(setup.warnings, fmt.Sprintf("%s is for Kafka's JVM; it has no effect on gregor", k))
		}
	}
	props := envProperties(env)
	base, err := readMounted(paths.mounted)
	if err != nil {
		return setup, err
	}
	if base == nil && len(props) == 0 {
		// Nothing configured: the single node a developer expects from
		// `docker run -p 9092:9092`.
		setup.serveArgs = defaultContainerArgs(paths.data)
		return setup, nil
	}
	if base == nil {
		base = map[string]string{}
	}
	maps.Copy(base, props)
	roles := base["process.roles"]
	if roles == "controller" && base["advertised.listeners"] != "" {
		return setup, errors.New("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller")
	}
	if base["listeners"] == "" && roles != "controller" && base["advertised.listeners"] != "" {
		base["listeners"] = anyHostListeners(base["advertised.listeners"])
	}
	if base["log.dirs"] == "" && base["log.dir"] == "" {
		base["log.dirs"] = paths.data
	}
	if err := secretsProperties(env, base, paths.secrets); err != nil {
		return setup, err
	}
	if roles != "" {
		setup.clusterID = env["CLUSTER_ID"]
		if setup.clusterID == "" {
			setup.clusterID = defaultContainerClusterID
		}
	}
	if err := writeProperties(paths.final, base); err != nil {
		return setup, err
	}
	setup.serveArgs = []string{"--config", paths.final}
	return setup, nil
}

// envProperties reads the KAFKA_* variables as KafkaDockerWrapper does.
func envProperties(env map[string]string) map[string]string {
	props := map[string]string{}
	for k, v := range env {
		if !strings.HasPrefix(k, "KAFKA_") || slices.Contains(jvmOnlyEnv, k) {
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(k, "KAFKA_"))
		name = strings.ReplaceAll(name, "_", ".")
		name = strings.ReplaceAll(name, "...", "-")
		name = strings.ReplaceAll(name, "..", "_")
		props[name] = v
	}
	return props
}

var listenerHost = regexp.MustCompile(`://[^:]*:`)

// anyHostListeners binds each advertised listener's port on all
// interfaces, as Kafka's image derives KAFKA_LISTENERS.
func anyHostListeners(advertised string) string {
	return listenerHost.ReplaceAllString(advertised, "://0.0.0.0:")
}

// secretsProperties points the keystore properties at /etc/kafka/secrets
// and reads the passwords from their credential files, as Kafka's image
// does for SSL listeners.
func secretsProperties(env, props map[string]string, dir string) error {
	if !strings.Contains(props["advertised.listeners"], "SSL://") {
		return nil
	}
	file := func(name string) (string, error) {
		v := env[name]
		if v == "" {
			return "", fmt.Errorf("%s must be set for an SSL listener", name)
		}
		return filepath.Join(dir, v), nil
	}
	secret := func(name string) (string, error) {
		path, err := file(name)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var err error
	set := func(prop string, get func(string) (string, error), name string) {
		if err != nil {
			return
		}
		var v string
		if v, err = get(name); err == nil {
			props[prop] = v
		}
	}
	set("ssl.keystore.location", file, "KAFKA_SSL_KEYSTORE_FILENAME")
	set("ssl.key.password", secret, "KAFKA_SSL_KEY_CREDENTIALS")
	set("ssl.keystore.password", secret, "KAFKA_SSL_KEYSTORE_CREDENTIALS")
	if auth := env["KAFKA_SSL_CLIENT_AUTH"]; strings.Contains(auth, "required") || strings.Contains(auth, "requested") {
		set("ssl.truststore.location", file, "KAFKA_SSL_TRUSTSTORE_FILENAME")
		set("ssl.truststore.password", secret, "KAFKA_SSL_TRUSTSTORE_CREDENTIALS")
	}
	return err
}

// readMounted reads a mounted server.properties; nil when there is none.
func readMounted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// writeProperties writes props, sorted by name, so that the file the node
// runs with can be read in the container.
func writeProperties(path string, props map[string]string) error {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("# Written by gregor container from the environment.\n")
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%s\n", k, escapeProperty(props[k]))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// escapeProperty escapes what a properties file reads specially in a
// value: backslashes, and line breaks.
func escapeProperty(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(v)
}

// defaultContainerArgs are serve's arguments for the container's single
// node when no variable or mounted file configures it.
func defaultContainerArgs(data string) []string {
	return []string{"--data-dir", data, "--listen", "0.0.0.0:9092",
		"--override", "advertised.listeners=PLAINTEXT://localhost:9092",
		"--override", "http.listener=0.0.0.0:9644"}
}

// containerHealthCommand is the image's HEALTHCHECK.
func containerHealthCommand() *command {
	return &command{name: "container-health", short: "the Docker image's health check: the node answers on its client listener",
		raw: func(args []string, _ io.Reader, out, errOut io.Writer) error {
			fs := flag.NewFlagSet("container-health", flag.ContinueOnError)
			fs.SetOutput(errOut)
			paths := imagePaths
			fs.StringVar(&paths.final, "final-config", paths.final, "the server.properties `file` gregor container wrote")
			fs.StringVar(&paths.data, "data-dir", paths.data, "log.dirs when no variable sets it (`directory`)")
			timeout := fs.Duration("timeout", 5*time.Second, "how long the node has to answer")
			if err := fs.Parse(args); err != nil {
				return err
			}
			addr, err := containerHealth(paths, *timeout)
			if err != nil {
				return fmt.Errorf("container-health: %w", err)
			}
			fmt.Fprintf(out, "healthy: %s answered\n", addr)
			return nil
		}}
}

// containerHealth checks the node gregor container started: it answers
// ApiVersions on its first PLAINTEXT client listener, or, when every
// client listener needs TLS or SASL (whose credentials the check does not
// have), accepts a connection on the first one.
func containerHealth(paths containerPaths, timeout time.Duration) (string, error) {
	args := []string{"--config", paths.final}
	if _, err := os.Stat(paths.final); errors.Is(err, fs.ErrNotExist) {
		// The node gregor container runs unconfigured (it writes no
		// file then); its advertised listener is needed for the config
		// to be valid at all.
		args = defaultContainerArgs(paths.data)
	}
	cfg, _, err := serveConfigOut(args, io.Discard)
	if err != nil {
		return "", err
	}
	var tcpOnly *config.Listener
	for i, l := range cfg.Listeners {
		if slices.Contains(cfg.ControllerListenerNames, l.Name) {
			continue
		}
		host := l.Host
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		addr := net.JoinHostPort(host, strconv.Itoa(l.Port))
		if cfg.ListenerSecurityProtocolMap[l.Name] != "PLAINTEXT" {
			if tcpOnly == nil {
				tcpOnly = &cfg.Listeners[i]
				tcpOnly.Host = host
			}
			continue
		}
		return addr, pingApiVersions(addr, timeout)
	}
	if tcpOnly == nil {
		return "", errors.New("no client listener in " + paths.final)
	}
	addr := net.JoinHostPort(tcpOnly.Host, strconv.Itoa(tcpOnly.Port))
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return addr, err
	}
	return addr, c.Close()
}

// pingApiVersions sends one ApiVersions request to addr.
func pingApiVersions(addr string, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(timeout), kgo.RetryTimeout(timeout), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	return nil
}
