// Style sheets imported for their side effect: Vite bundles them into the CSS asset.
declare module '*.css';
