// Package provision creates, repairs and prunes the Kubernetes objects the controller owns for
// each of its Gateways: in shared mode a VIP Service pointing at the shared proxy pool and an
// identity ServiceAccount; in dedicated mode whatever the registered DedicatedRenderer renders.
// It also allocates the internal ports the shared proxies bind for each Gateway listener.
package provision
