package proxy

import (
	"context"
	"errors"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

type table struct{ version string }
type sockKey struct{}
type socket struct{}

func (p *Proxy) apply(context.Context, *irv1.Snapshot) error { return errors.New("not implemented yet") }
func (p *Proxy) bound() []BoundListener                        { return nil }
func (p *Proxy) close(context.Context) error                   { return nil }
