// Headless Chromium with WebGPU on SwiftShader (../shared/browser/README.md), as the browser
// tests and the browser bench launch it.

import { chromium } from "playwright-core";

export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--enable-unsafe-webgpu", // the only adapter here is a CPU one, blocklisted otherwise
      // A WebGPU canvas (the dashboard) needs the compositor on Vulkan-SwiftShader too: with
      // the headless default (GL) Chromium cannot share the swap-chain image and loses the
      // device ("Device was destroyed") at the first getCurrentTexture. Compute needs none
      // of these.
      "--use-angle=swiftshader",
      "--enable-unsafe-swiftshader",
      "--ignore-gpu-blocklist",
      "--enable-gpu",
      "--enable-features=Vulkan",
      "--use-vulkan=swiftshader",
      "--no-sandbox",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
