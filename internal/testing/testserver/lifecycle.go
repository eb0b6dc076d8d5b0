package testserver

import (
	"errors"
	"os"
	"syscall"
)

// Kill ends the server with SIGKILL, as a crash or the OOM killer would:
// no shutdown, its sockets reset by the kernel. It waits for the exit.
// Restart starts it again on the same port. (Memcached's Stop is already a
// SIGKILL.)
func (r *Redis) Kill() error {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		return errors.New("testserver: kill: server not running")
	}
	return p.Kill()
}

// Freeze stops the server with SIGSTOP: a black hole. The kernel still
// completes connections into its listen backlog and takes the bytes sent
// on open ones, and nothing answers until Thaw (SIGCONT).
func (r *Redis) Freeze() error { return r.signal(syscall.SIGSTOP) }

// Thaw resumes a server stopped by Freeze.
func (r *Redis) Thaw() error { return r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig os.Signal) error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return errors.New("testserver: signal: server not running")
	}
	return p.Signal(sig)
}
