--[[
  PUBLISH from the shard that serves KEYS[1], in a Redis Cluster. A plain PUBLISH has no key, so
  the cluster client sends each to any node: messages that cross the cluster bus from different
  nodes can overtake one another, and one sent to a node that has just come back, before it has
  rejoined the bus, reaches only that node's subscribers. From one node that serves its slots
  they arrive in order, and while that node is away the publish fails (the caller's outbox retries).

  Used for a streamed call's chunks (KEYS[1] its call stream, whose shard also publishes the final
  reply: rpc-final-replies) and for broadcasts (KEYS[1] the channel's own name).

  Input:
    KEYS[1]  a key on the shard to publish from (only to place the script)
    ARGV[1]  the channel
    ARGV[2]  the message

  Output:
    the number of subscribers on this node that received it
]]
return redis.call('PUBLISH', ARGV[1], ARGV[2])
