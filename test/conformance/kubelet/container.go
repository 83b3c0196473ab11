package kubelet

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// killGrace is how long a container has between SIGTERM and SIGKILL. The pods of the suite hold
// no state worth a longer wait, and every namespace teardown waits on it.
const killGrace = 2 * time.Second

// readyPoll is how often a starting container's ports are looked up.
const readyPoll = 20 * time.Millisecond

// containerSpec is everything needed to start one container: resolved once, when the pod starts.
type containerSpec struct {
	name   string
	image  string
	binary string
	args   []string
	env    []string
	dir    string
	ports  []Port
}

// container is one container's process and what the status reports about it.
type container struct {
	spec *containerSpec
	logs *logBuffer

	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{} // closed when cmd has exited
	startedAt time.Time
	ready     bool
	running   bool
	restarts  int32
	lastExit  *exitInfo
}

type exitInfo struct {
	code       int32
	reason     string
	startedAt  time.Time
	finishedAt time.Time
}

// containerState is a copy of a container's status fields.
type containerState struct {
	name, image string
	running     bool
	ready       bool
	startedAt   time.Time
	restarts    int32
	lastExit    *exitInfo
}

// run starts the process in the pod's network namespace, calls ready once all its ports are bound,
// and returns when it exits (or the pod stops).
func (c *container) run(rt *podRuntime, ready func()) error {
	cmd := exec.Command("nsenter", append([]string{"--net=" + rt.sandbox.netns(), "--", c.spec.binary}, c.spec.args...)...)
	cmd.Env = c.spec.env
	cmd.Dir = c.spec.dir
	cmd.Stdout = c.logs.stream("stdout")
	cmd.Stderr = c.logs.stream("stderr")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})

	c.mu.Lock()
	if rt.ctx.Err() != nil {
		c.mu.Unlock()
		return rt.ctx.Err()
	}
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("starting %s: %w", c.spec.binary, err)
	}
	if c.cmd != nil {
		c.restarts++
	}
	c.cmd, c.exited, c.startedAt, c.running, c.ready = cmd, exited, time.Now(), true, false
	c.mu.Unlock()

	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	if c.awaitPorts(rt, exited) {
		c.mu.Lock()
		c.ready = true
		c.mu.Unlock()
		ready()
	}
	<-exited

	c.mu.Lock()
	defer c.mu.Unlock()
	code := int32(cmd.ProcessState.ExitCode())
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	c.lastExit = &exitInfo{code: code, reason: reason, startedAt: c.startedAt, finishedAt: time.Now()}
	c.running, c.ready = false, false
	if waitErr == nil {
		waitErr = errors.New("exited with status 0")
	}
	return waitErr
}

// awaitPorts polls the sandbox's socket tables until every port of the container is bound. It
// reports false when the process exits or the pod stops first.
func (c *container) awaitPorts(rt *podRuntime, exited <-chan struct{}) bool {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		if ok, err := listening(rt.sandbox.pid(), c.spec.ports); err == nil && ok {
			return true
		}
		select {
		case <-exited:
			return false
		case <-rt.ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// kill sends SIGTERM to the container's process group, then SIGKILL after killGrace.
func (c *container) kill() {
	c.mu.Lock()
	cmd, exited, running := c.cmd, c.exited, c.running
	c.mu.Unlock()
	if cmd == nil || !running {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(killGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}

func (c *container) state() containerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return containerState{
		name: c.spec.name, image: c.spec.image, running: c.running, ready: c.ready,
		startedAt: c.startedAt, restarts: c.restarts, lastExit: c.lastExit,
	}
}
