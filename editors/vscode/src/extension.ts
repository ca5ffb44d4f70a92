// The Warden extension: highlighting comes from the TextMate grammar (syntaxes/), everything
// else from the language server, `warden lsp`, which this starts for `.ward` files.
import * as vscode from "vscode";
import {
  Executable,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

function serverOptions(): ServerOptions {
  const path = vscode.workspace.getConfiguration("warden").get<string>("path") || "warden";
  const run: Executable = { command: path, args: ["lsp"] };
  return { run, debug: run };
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "ward" }],
    synchronize: {
      fileEvents: vscode.workspace.createFileSystemWatcher("**/*.{ward,rego}"),
    },
    outputChannelName: "Warden",
  };
  client = new LanguageClient("warden", "Warden", serverOptions(), clientOptions);
  await client.start();
  context.subscriptions.push({ dispose: () => void client?.stop() });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("warden.restartServer", async () => {
      await client?.stop();
      await start(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("warden.path")) {
        await client?.stop();
        await start(context);
      }
    }),
  );
  try {
    await start(context);
  } catch (err) {
    void vscode.window.showErrorMessage(
      `Warden: could not start \`warden lsp\` (${String(err)}). Set "warden.path" to the warden executable.`,
    );
  }
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
