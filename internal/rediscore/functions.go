package rediscore

import (
	"context"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/internal/scripts"
)

// Send is how a script call names its script.
type Send int8

const (
	// SendFunction is FCALL of the script's function (Script.Function) in
	// scripts.Library: the library's code ran once, when it loaded, so a
	// call runs only the script's own.
	SendFunction Send = iota
	// SendSHA is EVALSHA of the script's SHA1.
	SendSHA
	// SendSource is EVAL of the script's source, which also caches it for
	// EVALSHA.
	SendSource
)

// functions is a Conn's view of scripts.Library on its server: in use
// until the server refuses it.
type functions struct {
	off     atomic.Bool // refused: EVALSHA from now on
	loading atomic.Bool // a load is under way
}

// first is how a script call goes first: FCALL, or EVALSHA once the
// server has refused functions.
func (c *Conn) first() Send {
	if c.fn.off.Load() {
		return SendSHA
	}
	return SendFunction
}

// again reports whether a script call sent as how, which failed with err,
// goes once more with EVAL: only when the server's reply proves that it
// did not run (T5), its script or function missing or its way of naming
// it refused. A missing function starts a load of the library; a refusal
// of FCALL itself (an unknown command, an ACL that forbids it) turns
// functions off. A function refused because the server is out of memory
// (its writes are checked before it runs, where a script's first write is)
// runs as a script, so that a call that would write nothing is answered as
// before.
func (c *Conn) again(how Send, err error) bool {
	switch {
	case err == nil || how == SendSource:
		return false
	case how == SendSHA:
		return c.cl.IsNoScript(err)
	}
	// valkey-go gives an ERR reply's text without its "ERR ".
	text := strings.TrimPrefix(c.cl.ErrorText(err), "ERR ")
	switch {
	case strings.HasPrefix(text, "Function not found"):
		c.loadLibrary()
		return true
	case strings.HasPrefix(text, "OOM "):
		return true
	case strings.HasPrefix(text, "unknown command"),
		strings.HasPrefix(text, "NOPERM") && strings.Contains(strings.ToLower(text), "'fcall'"):
		c.functionsOff(err)
		return true
	}
	return false
}

// loadLibrary loads scripts.Library on every master, in the background,
// one load at a time: calls that find it missing meanwhile go with EVAL.
// A library of the same name already there is the same code. When the
// server refuses the load (refused), functions are off: a server that
// cannot load it would otherwise cost every call two round trips. After
// any other failure (no answer, a busy or loading server), the next call
// that finds the library missing tries again.
func (c *Conn) loadLibrary() {
	if c.fn.off.Load() || !c.fn.loading.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.fn.loading.Store(false)
		ctx, cancel := context.WithTimeout(c.bg, c.timeout)
		defer cancel()
		if err := c.cl.LoadLibrary(ctx, scripts.Library.Source); c.refused(err) {
			c.functionsOff(err)
		}
	}()
}

// refused reports whether err is the server's refusal of FUNCTION LOAD
// itself: an unknown command or subcommand, an ACL that forbids it, code
// it cannot compile or register.
func (c *Conn) refused(err error) bool {
	text := strings.TrimPrefix(c.cl.ErrorText(err), "ERR ")
	for _, p := range []string{"NOPERM", "unknown command", "unknown subcommand",
		"Error compiling", "Error registering"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// functionsOff turns functions off for good, logging it once.
func (c *Conn) functionsOff(err error) {
	if c.fn.off.CompareAndSwap(false, true) {
		c.log.Warn("fleetstore: the server refuses script functions (FCALL, FUNCTION LOAD); "+
			"scripts run with EVALSHA", zap.String("url", c.display), zap.Error(err))
	}
}
