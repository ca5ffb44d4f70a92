// A production build into dist/, relative asset paths so any static server serves it.
export default { base: "./", build: { outDir: "dist", emptyOutDir: true, target: "es2022" }, logLevel: "warn" };
