// Just enough of a Kubernetes API server for kubectl exec/attach/port-forward against one pod: the
// discovery documents, the pod object, and the streaming subresources, which it proxies (raw upgrade,
// as the API server and kubelet do) to the URL the CRI call returned. Lets the tests drive the real
// Go clients (spdystream, gorilla websocket) at our streaming server.
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

export type Subresource = 'exec' | 'attach' | 'portforward';

export interface FakeApiServer {
  url: string;
  /** Writes a kubeconfig pointing at this server; returns its path. */
  writeKubeconfig(path: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Serves pod `podName` in namespace default with `containers`. `streamUrl` answers a streaming
 * subresource request (its query as kubectl sent it) with the CRI streaming URL to proxy to.
 */
export async function startFakeApiServer(podName: string, containers: string[], streamUrl: (sub: Subresource, query: URLSearchParams) => Promise<string>): Promise<FakeApiServer> {
  const json = (body: unknown) => JSON.stringify(body);
  const docs: Record<string, string> = {
    '/api': json({ kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] }),
    '/apis': json({ kind: 'APIGroupList', apiVersion: 'v1', groups: [] }),
    '/api/v1': json({
      kind: 'APIResourceList', groupVersion: 'v1', resources: [
        { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: ['get', 'list'], shortNames: ['po'] },
        { name: 'pods/exec', singularName: '', namespaced: true, kind: 'PodExecOptions', verbs: ['create', 'get'] },
        { name: 'pods/attach', singularName: '', namespaced: true, kind: 'PodAttachOptions', verbs: ['create', 'get'] },
        { name: 'pods/portforward', singularName: '', namespaced: true, kind: 'PodPortForwardOptions', verbs: ['create', 'get'] },
      ],
    }),
    [`/api/v1/namespaces/default/pods/${podName}`]: json({
      kind: 'Pod', apiVersion: 'v1',
      metadata: { name: podName, namespace: 'default', uid: '00000000-0000-0000-0000-000000000001' },
      spec: { containers: containers.map((name) => ({ name, image: 'busybox', stdin: true })) },
      status: { phase: 'Running', containerStatuses: containers.map((name) => ({ name, ready: true, state: { running: {} } })) },
    }),
  };
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const body = docs[path];
    res.writeHead(body ? 200 : 404, { 'content-type': 'application/json' });
    res.end(body ?? json({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${path} not found` }));
  });
  const sockets = new Set<Duplex>();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const u = new URL(req.url ?? '/', 'http://x');
    const m = new RegExp(`^/api/v1/namespaces/default/pods/${podName}/(exec|attach|portforward)$`).exec(u.pathname);
    if (!m) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    void streamUrl(m[1] as Subresource, u.searchParams).then((target) => {
      const t = new URL(target);
      const upstream = connect(Number(t.port), t.hostname);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => socket.destroy());
      const headers = Object.entries(req.headers).filter(([k]) => k !== 'host').flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${k}: ${x}\r\n`));
      upstream.write(`${req.method} ${t.pathname}${u.search} HTTP/1.1\r\nhost: ${t.host}\r\n${headers.join('')}\r\n`);
      if (head.length) upstream.write(head);
      socket.pipe(upstream).pipe(socket);
      socket.on('close', () => upstream.destroy());
      upstream.on('close', () => socket.destroy());
    }, (err: Error) => {
      socket.end(`HTTP/1.1 500 Internal Server Error\r\nContent-Length: ${Buffer.byteLength(err.message)}\r\n\r\n${err.message}`);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    writeKubeconfig: async (path) => {
      await writeFile(path, [
        'apiVersion: v1', 'kind: Config', 'current-context: fake',
        'clusters:', '- name: fake', '  cluster:', `    server: ${url}`,
        'contexts:', '- name: fake', '  context:', '    cluster: fake', '    user: fake', '    namespace: default',
        'users:', '- name: fake', '  user: {}', '',
      ].join('\n'));
      return path;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
