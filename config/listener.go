package config

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Listener is one entry of listeners or advertised.listeners, such as
// "PLAINTEXT://localhost:9092". An empty Host binds every interface; when
// such a listener is advertised, the broker substitutes the machine's host
// name, as Kafka does.
type Listener struct {
	Name string // upper-cased, as Kafka normalises listener names
	Host string // without IPv6 brackets
	Port int    // 0 asks the OS for a free port
}

// String renders the listener in Kafka's NAME://host:port form.
func (l Listener) String() string {
	return l.Name + "://" + l.Address()
}

// Address is host:port, bracketing an IPv6 host.
func (l Listener) Address() string {
	return net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// listenerRE is Kafka's SocketServerConfigs.URI_PARSE_REGEXP.
var listenerRE = regexp.MustCompile(`^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$`)

// ParseListener parses one NAME://host:port entry. The host may be empty
// ("CONTROLLER://:9093"), a name, an IPv4 address or an IPv6 address in
// brackets ("PLAINTEXT://[::1]:9092").
func ParseListener(s string) (Listener, error) {
	m := listenerRE.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return Listener{}, fmt.Errorf("unable to parse %s to a broker endpoint", s)
	}
	port, err := strconv.Atoi(m[3])
	if err != nil || port < 0 || port > 65535 {
		return Listener{}, fmt.Errorf("port of %s is not between 0 and 65535", s)
	}
	return Listener{Name: strings.ToUpper(m[1]), Host: m[2], Port: port}, nil
}

// ParseListeners parses a comma-separated listener list. An empty list is
// valid here; whether it is acceptable depends on the node's roles.
func ParseListeners(s string) ([]Listener, error) {
	var out []Listener
	for _, e := range splitList(s) {
		l, err := ParseListener(e)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// checkDistinct applies Kafka's rules for the listeners property: each
// listener has its own name and, unless one is IPv4 and the other IPv6 (or
// the port is 0), its own port.
func checkDistinct(ls []Listener) error {
	names := map[string]bool{}
	for _, l := range ls {
		if names[l.Name] {
			return fmt.Errorf("each listener must have a different name; %s appears twice", l.Name)
		}
		names[l.Name] = true
	}
	byPort := map[int][]Listener{}
	for _, l := range ls {
		if l.Port != 0 {
			byPort[l.Port] = append(byPort[l.Port], l)
		}
	}
	for port, same := range byPort {
		if len(same) < 2 {
			continue
		}
		if len(same) == 2 && ipFamily(same[0].Host)+ipFamily(same[1].Host) == 4+6 {
			continue
		}
		return fmt.Errorf("each listener must have a different port (port %d), unless one is IPv4 and the other IPv6", port)
	}
	return nil
}

// ipFamily is 4 or 6 for a literal address, 0 for a name or empty host.
func ipFamily(host string) int {
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return 0
	case ip.To4() != nil:
		return 4
	}
	return 6
}

// hostPortRE is Kafka's Utils.HOST_PORT_PATTERN.
var hostPortRE = regexp.MustCompile(`^(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)$`)

// parseHostPort splits "host:port" as Kafka's Utils.getHost/getPort do,
// and refuses an empty host and the unroutable 0.0.0.0.
func parseHostPort(s string) (string, int, error) {
	m := hostPortRE.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return "", 0, fmt.Errorf("%q is not in the form host:port", s)
	}
	port, err := strconv.Atoi(m[2])
	if err != nil || port > 65535 {
		return "", 0, fmt.Errorf("port of %q is not between 0 and 65535", s)
	}
	if m[1] == "0.0.0.0" {
		return "", 0, fmt.Errorf("host %s of %q is not routable", m[1], s)
	}
	return m[1], port, nil
}

// parseVoters parses controller.quorum.voters: "id@host:port,...". The
// address is kept as host:port, with brackets for IPv6.
func parseVoters(list []string) (map[int32]string, error) {
	voters := make(map[int32]string, len(list))
	for _, e := range list {
		id, addr, ok := strings.Cut(e, "@")
		if !ok || strings.Contains(addr, "@") {
			return nil, fmt.Errorf("entry %q should be in the form {id}@{host}:{port}", e)
		}
		n, err := strconv.ParseInt(javaTrim(id), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("entry %q: voter id %q is not a non-negative integer", e, id)
		}
		host, port, err := parseHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", e, err)
		}
		if _, dup := voters[int32(n)]; dup {
			return nil, fmt.Errorf("voter id %d appears twice", n)
		}
		voters[int32(n)] = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return voters, nil
}
