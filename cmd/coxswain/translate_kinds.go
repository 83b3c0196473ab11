package main

// The controller halves of the stock modules (translate.*). modules/standard stays free of
// Kubernetes imports for proxies, so the translator's modules are listed here.
import (
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/udproute/translate"
)
