// Package fetch is the broker's machinery for Fetch responses: the cache of
// fetch sessions (KIP-227, session.go), and the zero-copy writer that sends
// records from segment files to the socket with sendfile(2)
// (zerocopy.go). The Fetch handler itself is broker/01_fetch.go.
package fetch
