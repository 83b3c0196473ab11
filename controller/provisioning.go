package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/controller/translator"
)

// Provisioning configures the shared mode (controller/provision): each Gateway gets a VIP Service
// in front of the shared proxy pool and an identity ServiceAccount, and its listeners are bound at
// internal ports. Nil Options.Provisioning: no objects are provisioned and listeners bind their
// own ports (standalone, --in-process-proxy, --gateway-address-pool).
type Provisioning struct {
	// ServiceType of the VIP Services (LoadBalancer when empty); a GatewayClass's parameters may
	// set another.
	ServiceType corev1.ServiceType
	// ProxySelector selects the shared pool's pods (provision.DefaultProxySelector when nil).
	ProxySelector map[string]string
	// ProxyNamespace is the shared pool's namespace, whose selected pods are published as every
	// VIP Service's endpoints (the controller's own namespace when empty).
	ProxyNamespace string
	// Ports is the internal port range (provision.DefaultPortRange when zero).
	Ports provision.PortRange
	// Dedicated turns the dedicated mode on (dedicated.go); nil: off.
	Dedicated *Dedicated
}

// supportedFeatures are the features the modules serve, with the shared mode's while it is on.
func supportedFeatures(opts Options) []gwapiv1.SupportedFeature {
	fs := features.Supported(opts.Registry)
	if opts.Provisioning == nil {
		return fs
	}
	fs = append(fs, provision.Features()...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	return slices.CompactFunc(fs, func(a, b gwapiv1.SupportedFeature) bool { return a.Name == b.Name })
}

// writerAddresses are the status writer's fallback addresses for a Gateway whose translated
// status has none: --status-address, except in shared mode, where the provisioner already fell
// back to them and a Gateway without addresses has none for a reason (its Service's address was
// refused, or it has no Service yet).
func (c *Controller) writerAddresses() []gwapiv1.GatewayStatusAddress {
	if c.opts.Provisioning != nil {
		return nil
	}
	return c.opts.StatusAddresses
}

// ownedWatch caches the ServiceAccounts and EndpointSlices the controller provisioned, so that an
// edited or deleted one is repaired; the owned Services are in the watch's Service cache already.
// It also caches the shared pool's pods, which the VIP Services' EndpointSlices list.
type ownedWatch struct {
	factory  informers.SharedInformerFactory
	accounts corelisters.ServiceAccountLister
	// slices are the VIP Services' EndpointSlices (the watch's cache of every EndpointSlice only
	// refreshes endpoints, it does not provision).
	slices discoverylisters.EndpointSliceLister
	// deployments are the dedicated mode's proxy Deployments, so that an edited or deleted one is
	// repaired at once.
	deployments appslisters.DeploymentLister
	// configMaps, hpas and pdbs are the rest of a dedicated pool (the trust-bundle copy, the
	// optional HorizontalPodAutoscaler and PodDisruptionBudget), cached for the same reason; nil
	// without the dedicated mode.
	configMaps corelisters.ConfigMapLister
	hpas       autoscalinglisters.HorizontalPodAutoscalerLister
	pdbs       policylisters.PodDisruptionBudgetLister
	// pods is the shared pool's namespace, filtered by the pool's selector: a pod that starts,
	// gets Ready or terminates changes every VIP Service's endpoints.
	podFactory informers.SharedInformerFactory
	pods       corelisters.PodLister
	informers  []cache.SharedIndexInformer
}

var managedSelector = provision.LabelManagedBy + "=" + provision.ManagedBy

func newOwnedWatch(kube kubernetes.Interface, pv *Provisioning, ev events) (*ownedWatch, error) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }))
	inf := f.Core().V1().ServiceAccounts()
	if _, err := inf.Informer().AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged)); err != nil {
		return nil, fmt.Errorf("adding event handler: %w", err)
	}
	deps := f.Apps().V1().Deployments()
	// Spec, label and annotation edits and deletions, not the rollout's status updates.
	if _, err := deps.Informer().AddEventHandler(changeHandler(changeConfig, ev, generationChanged)); err != nil {
		return nil, fmt.Errorf("adding event handler: %w", err)
	}
	eps := f.Discovery().V1().EndpointSlices()
	if _, err := eps.Informer().AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged)); err != nil {
		return nil, fmt.Errorf("adding event handler: %w", err)
	}
	sel := pv.ProxySelector
	if sel == nil {
		sel, _ = labels.ConvertSelectorToLabelsMap(provision.DefaultProxySelector)
	}
	ns := pv.ProxyNamespace
	if ns == "" {
		ns = OwnNamespace()
	}
	pf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripManagedFields),
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.SelectorFromSet(sel).String() }))
	pods := pf.Core().V1().Pods()
	if _, err := pods.Informer().AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged)); err != nil {
		return nil, fmt.Errorf("adding event handler: %w", err)
	}
	w := &ownedWatch{factory: f, accounts: inf.Lister(), deployments: deps.Lister(), slices: eps.Lister(),
		podFactory: pf, pods: pods.Lister(),
		informers: []cache.SharedIndexInformer{inf.Informer(), deps.Informer(), eps.Informer(), pods.Informer()}}
	if pv.Dedicated != nil {
		cms := f.Core().V1().ConfigMaps()
		hpas := f.Autoscaling().V2().HorizontalPodAutoscalers()
		pdbs := f.Policy().V1().PodDisruptionBudgets()
		// ConfigMaps have no status; an HPA's and a PDB's status churn (the HPA controller writes
		// it every sync), so only their spec, labels and annotations count.
		for _, h := range []struct {
			inf     cache.SharedIndexInformer
			changed func(old, cur any) bool
		}{{cms.Informer(), resourceVersionChanged}, {hpas.Informer(), generationChanged}, {pdbs.Informer(), generationChanged}} {
			if _, err := h.inf.AddEventHandler(changeHandler(changeConfig, ev, h.changed)); err != nil {
				return nil, fmt.Errorf("adding event handler: %w", err)
			}
			w.informers = append(w.informers, h.inf)
		}
		w.configMaps, w.hpas, w.pdbs = cms.Lister(), hpas.Lister(), pdbs.Lister()
	}
	return w, nil
}

// provisionScheme knows every kind a provisioned object can be: client-go's built-in kinds
// (Services, ServiceAccounts, Deployments, HPAs, PDBs) and the Gateway API's.
func provisionScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := gwapiv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

// newProvisioner builds a leadership term's provisioner; nil when the shared mode is off.
func (c *Controller) newProvisioner() *provision.Provisioner {
	pv := c.opts.Provisioning
	if pv == nil {
		return nil
	}
	scheme, err := provisionScheme()
	if err == nil {
		var cl client.Client
		cl, err = client.New(c.opts.REST, client.Options{Scheme: scheme})
		if err == nil {
			var p *provision.Provisioner
			p, err = provision.New(provision.Options{
				Log: c.log.Named("provision"), Client: c.manifests.wrap(cl), Services: c.watch.services, ServiceAccounts: c.owned.accounts, Deployments: c.owned.deployments,
				EndpointSlices: c.owned.slices, ProxyPods: c.owned.pods,
				ConfigMaps: c.owned.configMaps, HPAs: c.owned.hpas, PDBs: c.owned.pdbs,
				ServiceType: pv.ServiceType, ProxySelector: pv.ProxySelector, Ports: pv.Ports,
				StatusAddresses: c.opts.StatusAddresses, Dedicated: c.dedicatedRenderer(),
			})
			if err == nil {
				return p
			}
		}
	}
	// Options were validated in New: this is a programming error, and provisioning stays off.
	c.log.Error("the shared-mode provisioner cannot start", zap.Error(err))
	return nil
}

// provision reconciles the provisioned objects of store's Gateways and returns what the
// translator needs of them. A transient failure is retried after retry.
func (c *Controller) provision(ctx context.Context, p *provision.Provisioner, store *translator.Store, retry func()) map[types.NamespacedName]*translator.Provisioned {
	ours := c.ourClasses(store)
	in := provision.Input{Classes: map[string]*gwapiv1.GatewayClass{}, ListenerSets: store.ListenerSets, ClientTrafficPolicies: store.ClientTrafficPolicies}
	for _, gc := range store.GatewayClasses {
		if ours[gc.Name] {
			in.Classes[gc.Name] = gc
		}
	}
	for _, gw := range store.Gateways {
		if ours[string(gw.Spec.GatewayClassName)] {
			in.Gateways = append(in.Gateways, gw)
		}
	}
	out, err := p.Reconcile(ctx, in)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("provisioning Gateways", zap.Error(err))
		retry()
	}
	return out
}

// dedicatedRenderer is the provisioner's dedicated mode; nil (the registered one, if any) when off.
func (c *Controller) dedicatedRenderer() provision.DedicatedRenderer {
	if c.opts.Provisioning.Dedicated == nil {
		return nil
	}
	return &dedicatedRenderer{opts: c.opts.Provisioning.Dedicated, serviceType: c.opts.Provisioning.ServiceType, params: c.watch.gatewayParameters}
}
