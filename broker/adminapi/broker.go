package adminapi

// Broker is the broker's side of the admin API as the admin server is
// given it: the interfaces it needs, each nil when the broker does not
// serve that part. The server registers a part's endpoints by whether
// it is there, and finds nothing by type assertion. What an endpoint
// answers without its part is in each field's comment.
type Broker struct {
	// Topics is everything about live topics; nil: the topic endpoints
	// answer 503.
	Topics Topics
	// Brokers serves the leader and dynamic configuration endpoints;
	// nil: they answer 503.
	Brokers Brokers
	// LoadReporter serves GET .../broker-stats/load-report; nil: 503.
	LoadReporter LoadReporter
	// Quota limits the topics of a namespace; nil: only Topics'
	// CreateTopic checks a limit of its own.
	Quota TopicQuota
	// SubscriptionProperties keeps subscription properties; nil: their
	// endpoints, and a subscription created with properties, answer 405.
	SubscriptionProperties SubscriptionProperties
	// Deletes reach every region; nil: deletes are this region's only.
	Deletes FederatedDeletes
	// Bundles serves the namespace bundle operations and a topic's
	// bundle; nil: they answer 503.
	Bundles Bundles
	// Splitter splits bundles; nil: a split answers 503.
	Splitter BundleSplitter
	// Compactor compacts topics; nil: the compaction endpoints answer
	// 405.
	Compactor Compactor
	// Transactions describes transactions; nil: their endpoints answer
	// 503.
	Transactions Transactions
	// PolicyRefresher applies a change to a topic's own policies at once;
	// nil: the broker applies it when it next re-reads policies.
	PolicyRefresher TopicPolicyRefresher
}
