package testserver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Process is one run of a server: redis-server, valkey-server, a
// Sentinel or memcached. The benchmarks' servers (bench/cmd/compare) are
// run with it too.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
}

// StartProcess starts cmd and waits for its exit in the background.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status, once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGINT (a clean shutdown), then SIGKILL after 5s, and waits
// for the exit.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill sends SIGKILL, which also ends a process stopped by SIGSTOP, and
// waits for the exit. A process that has exited already is no error.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// Signal sends sig, e.g. SIGSTOP to freeze the server.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// RedisConf returns the redis.conf directives of a server on loopback
// port, with dir as its working directory, its log in dir/server.log and
// no persistence.
func RedisConf(port int, dir string) []string {
	return []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + dir,
		`save ""`,
		"appendonly no",
		"daemonize no",
		"logfile " + filepath.Join(dir, "server.log"),
	}
}

// WriteConf writes a server's config file at path, one directive a
// line. It stays writable by its owner: Sentinel rewrites its own.
func WriteConf(path string, lines []string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// LogTail returns the last 2000 bytes of the log of RedisConf(…, dir), or
// "(no log)".
func LogTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "server.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
