package config

import (
	"regexp"
	"strconv"
	"strings"
)

// hostPatternRE is Kafka's Utils.validHostPattern: a name or an address.
var hostPatternRE = regexp.MustCompile(`^[\p{L}\p{N}._\-:%]+$`)

// csvSplitRE splits a comma-separated value as Kafka's Csv does.
var csvSplitRE = regexp.MustCompile(`\s*,\s*`)

// checkSockets parses max.connections.per.ip.overrides and applies
// Kafka's start-up checks of the socket settings: the per-IP limit may be
// 0 only with overrides, and a buffer size is -1 (the OS default) or
// positive, as Java's Socket.setSendBufferSize requires.
func (b *Broker) checkSockets(vals map[string]value, props map[string]string) error {
	const name = "max.connections.per.ip.overrides"
	raw := vals[name].s
	b.MaxConnectionsPerIPOverrides = map[string]int32{}
	if raw != "" {
		// Kafka's Csv.parseCsvMap: entries split on commas, each on its
		// last colon (an IPv6 address keeps its own).
		for _, e := range csvSplitRE.Split(raw, -1) {
			i := strings.LastIndex(e, ":")
			if i < 0 {
				return invalid(name, raw, "entry %q is not host:count", e)
			}
			host, count := strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
			n, err := strconv.ParseInt(count, 10, 32)
			if err != nil {
				return invalid(name, raw, "the count of %q is not a number", host)
			}
			if !hostPatternRE.MatchString(host) {
				return invalid(name, raw, "contains invalid addresses : %s", host)
			}
			b.MaxConnectionsPerIPOverrides[host] = int32(n)
		}
	}
	if b.MaxConnectionsPerIP == 0 && len(b.MaxConnectionsPerIPOverrides) == 0 {
		return invalid("max.connections.per.ip", "0", "max.connections.per.ip can be set to zero only if %s property is set.", name)
	}
	b.ListenerMaxConnectionCreationRate = map[string]int32{}
	b.ListenerMaxConnections = map[string]int32{}
	for _, l := range b.Listeners {
		for name, into := range map[string]map[string]int32{
			connectionRateKey: b.ListenerMaxConnectionCreationRate,
			maxConnectionsKey: b.ListenerMaxConnections,
		} {
			key := listenerPrefix(l.Name) + name
			raw, ok := props[key]
			if !ok {
				continue
			}
			v, err := parseChecked(key, TypeInt, atLeast(0), raw)
			if err != nil {
				return err
			}
			into[l.Name] = int32(v.i)
		}
	}
	for _, k := range []struct {
		name string
		v    int32
	}{{"socket.send.buffer.bytes", b.SocketSendBufferBytes}, {"socket.receive.buffer.bytes", b.SocketReceiveBufferBytes}} {
		if k.v != -1 && k.v <= 0 {
			return invalid(k.name, b.rawOrDefault(props, k.name), "a socket buffer size is -1 (the OS default) or positive")
		}
	}
	return nil
}

// connectionRateKey and maxConnectionsKey are the socket limits a
// listener may also have with its listener.name.<listener>. prefix.
const (
	connectionRateKey = "max.connection.creation.rate"
	maxConnectionsKey = "max.connections"
)

// isListenerRateKey reports whether name is a listener's
// max.connection.creation.rate or max.connections.
func (b *Broker) isListenerRateKey(name string) bool {
	for _, l := range b.Listeners {
		if name == listenerPrefix(l.Name)+connectionRateKey || name == listenerPrefix(l.Name)+maxConnectionsKey {
			return true
		}
	}
	return false
}
