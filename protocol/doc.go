// Package protocol is Kafka's wire format without I/O: frames, request and
// response headers, the table of supported API versions, record batches and
// their compression codecs. Bytes go in and values come out, so everything
// here can be fuzzed and tested with captured frames. Request and response
// bodies are kmsg types.
package protocol
