/**
 * Tensor-name normalisation. Conversions name the same weight differently:
 *   language_model.model.layers.0...   (MLX multimodal conversions)
 *   model.language_model.layers.0...   (transformers multimodal layout)
 *   model.layers.0...                  (text-only conversions, assistants)
 * Normalised names drop those prefixes: "layers.0.self_attn.q_proj.weight", "embed_tokens.weight",
 * "norm.weight", and the assistant's root "pre_projection.weight" / "post_projection.weight".
 */

/** Prefixes stripped, longest first (the first match wins). */
const PREFIXES = ['language_model.model.', 'model.language_model.', 'language_model.', 'model.'];

/** Towers of the multimodal checkpoints this text-only engine ignores (checked after dropping "model."). */
const IGNORED_ROOTS = [
  'vision_tower.',
  'vision_model.',
  'embed_vision.',
  'audio_tower.',
  'audio_model.',
  'embed_audio.',
  'multi_modal_projector.',
  'vision_embedder.',
  'audio_embedder.',
  'visual.', // Qwen3.5's vision tower (model.visual.* in transformers' layout)
];

/** True for vision/audio tensors that are skipped without error. */
export function isIgnoredTensor(name: string): boolean {
  const n = name.startsWith('model.') ? name.slice('model.'.length) : name;
  return IGNORED_ROOTS.some((p) => n.startsWith(p));
}

/** The normalised name of a language-model tensor. */
export function normaliseTensorName(name: string): string {
  for (const p of PREFIXES) if (name.startsWith(p)) return name.slice(p.length);
  return name;
}
