package coord

// Pending is an answer a coordinator owes. The request it answers was
// queued on its shard before the method returned, so requests made one
// after another take effect in that order, as Kafka serves a connection's
// requests, while the broker waits for their answers elsewhere (in each
// request's background phase). Calling it blocks until the answer is ready.
type Pending[T any] func() T

// Ready is a Pending whose answer is already known.
func Ready[T any](v T) Pending[T] { return func() T { return v } }

// Then is p's answer passed through f, for the shaping a method does after
// the shard answered.
func Then[T, U any](p Pending[T], f func(T) U) Pending[U] { return func() U { return f(p()) } }
