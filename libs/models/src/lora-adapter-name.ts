/**
 * The name a deployment's adapter has on its LoRA server and its folder under LORA_ADAPTER_DIR:
 * its row's id. Public model names are unique only within a namespace, so they never name
 * anything shared.
 */
export function loraAdapterName(deploymentId: string): string {
  return `atelier-${deploymentId}`;
}

/** The deployment id in an adapter name, or undefined for any other name. */
export function deploymentOfAdapter(name: string): string | undefined {
  return /^atelier-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(name)?.[1];
}
