package translation

import (
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
)

// FeatureProvider is implemented by controller-side modules that make Gateway API features
// servable: route kinds claim the features of their matches, filter translators those of their
// filters. A GatewayClass advertises a feature only when every module it requires is compiled
// in (controller/features), so a distribution that leaves a filter out never claims it.
type FeatureProvider interface {
	// GatewayAPIFeatures lists the features the module translates. It must have no side
	// effects: it is called on a fresh instance from the module's New.
	GatewayAPIFeatures() []Feature
}

// Feature is one Gateway API feature and the modules that serve it.
type Feature struct {
	Name gwfeatures.FeatureName
	// Requires are the modules a proxy loads to serve the feature (a route kind, a filter, a
	// listener). The feature is advertised only when all of them are compiled in.
	Requires []core.ModuleID
}
