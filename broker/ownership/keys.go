package ownership

import (
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Ownership is an ownership record, stored as JSON under
// /isobar/<region>/ownership/<tenant>/<namespace>/<bundle>.
type Ownership struct {
	Broker     string `json:"broker"`
	ServiceURL string `json:"serviceUrl"`
	HTTPURL    string `json:"httpUrl"`
	// The owner's TLS URLs, empty without TLS.
	ServiceURLTLS string    `json:"serviceUrlTls,omitempty"`
	HTTPURLTLS    string    `json:"httpUrlTls,omitempty"`
	Acquired      time.Time `json:"acquired"`
}

// BrokersPrefix is the prefix of the region's broker registrations.
func BrokersPrefix(region string) string { return metastore.RegionPrefix(region) + "brokers/" }

// BrokerKey is the registration key of broker id.
func BrokerKey(region, id string) string { return BrokersPrefix(region) + id }

// OwnershipPrefix is the prefix of the region's ownership keys.
func OwnershipPrefix(region string) string { return metastore.RegionPrefix(region) + "ownership/" }

// OwnershipKey is the ownership key of bundle b of namespace ns
// ("tenant/namespace"); it fails when ns or b is invalid.
func OwnershipKey(region, ns string, b topic.Bundle) (string, error) {
	s, err := bundleKey(ns, b)
	if err != nil {
		return "", err
	}
	return OwnershipPrefix(region) + s, nil
}

// bundleKey is "tenant/namespace/<bundle>", the ownership key without the
// region prefix; it is also what placement hashes.
func bundleKey(ns string, b topic.Bundle) (string, error) {
	t, n, err := topic.ParseNamespace(ns)
	if err != nil {
		return "", fmt.Errorf("ownership: %w", err)
	}
	if b.Hi <= b.Lo {
		return "", fmt.Errorf("%w: %s of %s is empty", ErrInvalidBundle, b, ns)
	}
	return t + "/" + n + "/" + b.String(), nil
}
