// Package coordtest is the test support every coordinator's tests share: a
// clock that moves only when told, an in-memory store whose appends can be
// held and failed, waiting until a coordinator's shards are idle, and the
// datadriven script runner with its argument parsing and error names. Each
// coordinator's tests bring their own harness (how to build, load and drive
// their Coordinator) and script commands.
package coordtest
