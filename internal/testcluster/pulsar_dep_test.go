package testcluster

import _ "github.com/apache/pulsar-client-go/pulsar"
import _ "github.com/apache/pulsar-client-go/pulsaradmin"
