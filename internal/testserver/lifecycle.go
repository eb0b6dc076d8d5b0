package testserver

import "errors"

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
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.done
	return nil
}
