package main

// The controller halves of the route kinds (translate.route.*). modules/standard stays free of
// Kubernetes imports for proxies, so the translator's modules are listed here.
import (
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/udproute/translate"
)
