// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one declaration and one entry per component.
#include "parity/parity.h"

namespace ltx::parity {

void run_transformer(Run& run);      // transformer.cpp
void run_connector(Run& run);        // connector.cpp
void run_text_encoder(Run& run);     // text_encoder.cpp
void video_vae_component(Run& run);  // video_vae.cpp
void upsampler_component(Run& run);  // upsampler.cpp
void run_audio_parity(Run& run);     // audio.cpp
void run_duration_head(Run& run);    // duration_head.cpp
void run_diffusion_decoder(Run& run);  // diffusion_decoder.cpp
void run_pipeline_parity(Run& run);    // pipeline.cpp
void run_gemma_vision(Run& run);       // gemma_vision.cpp

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
      {"transformer", "<case>.weights.safetensors [then the bf16 weights for bf16w]", run_transformer},
      {"connector", "<case>.weights.safetensors [then the text-encoder / text_proj file of a split pack]",
       run_connector},
      {"text-encoder", "text_gemma*.te.safetensors or a Gemma root folder, then the LTX file",
       run_text_encoder},
      {"video-vae", "vae_<case>.weights.safetensors", video_vae_component},
      {"upsampler",
       "upsampler_<case>.weights.safetensors + vae_ltx23.weights.safetensors (latent statistics)",
       upsampler_component},
      {"audio", "audio_<case>.weights.safetensors", run_audio_parity},
      {"diffusion-decoder",
       "diffdec_<case>.weights.safetensors [then the gated variant for out.gated.pixels]",
       run_diffusion_decoder},
      {"duration-head", "duration_<case>.weights.safetensors (or a checkpoint with duration_head.*)",
       run_duration_head},
      {"pipeline",
       "the recording's files in any order: the LTX checkpoint [+ spatial / temporal upsampler] [+ the LoRA it fuses]",
       run_pipeline_parity},
      {"gemma-vision", "the Gemma 3 root folder (or text-encoder file) with its vision tower",
       run_gemma_vision},
  };
  return kComponents;
}

}  // namespace ltx::parity
